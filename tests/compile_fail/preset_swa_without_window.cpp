// expect: unikv: the preset's SWA or Mamba description is incomplete
// SWA layers without a window; the control sets one.
#include <string_view>

#include <unikv/presets.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
constexpr int window = 128;
#else
constexpr int window = 0;
#endif

struct Model {
    static constexpr std::string_view name = "model";
    using layout = SwaFullLayout;
    static constexpr ModelDescription model = {
        .full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
        .swa = {.layers = 5, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
        .swa_window_tokens = window,
    };
};

int main() { return static_cast<int>(arena_config<Model>({.arena_bytes = 4096}).arena_bytes == 0); }
