// expect: unikv: a model preset needs `using layout = <a unikv layout>;`
// A preset without a name is not a preset; the control names it.
#include <string_view>

#include <unikv/presets.hpp>

using namespace unikv;

struct Model {
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    static constexpr std::string_view name = "model";
#endif
    using layout = FullLayout;
    static constexpr ModelDescription model = {.full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2}};
};

int main() { return static_cast<int>(arena_config<Model>({.arena_bytes = 4096}).arena_bytes == 0); }
