// expect: unikv: the preset's model and layout disagree on SWA or Mamba
// A model with sliding-window layers on FullLayout, which has no SWA pool; the control uses SwaFullLayout.
#include <string_view>

#include <unikv/presets.hpp>

using namespace unikv;

struct Model {
    static constexpr std::string_view name = "model";
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    using layout = SwaFullLayout;
#else
    using layout = FullLayout;
#endif
    static constexpr ModelDescription model = {
        .full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
        .swa = {.layers = 5, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
        .swa_window_tokens = 128,
    };
};

int main() { return static_cast<int>(arena_config<Model>({.arena_bytes = 4096}).arena_bytes == 0); }
