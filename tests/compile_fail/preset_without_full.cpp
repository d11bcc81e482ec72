// expect: unikv: the preset's model.full describes no FULL attention layers
// A preset whose FULL layers have no KV heads; the control gives them one.
#include <string_view>

#include <unikv/presets.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
constexpr int kv_heads = 1;
#else
constexpr int kv_heads = 0;
#endif

struct Model {
    static constexpr std::string_view name = "model";
    using layout = FullLayout;
    static constexpr ModelDescription model = {
        .full = {.layers = 1, .kv_heads = kv_heads, .head_dim = 8, .dtype_bytes = 2}};
};

int main() { return static_cast<int>(arena_config<Model>({.arena_bytes = 4096}).arena_bytes == 0); }
