// expect: unikv: a K/V row or Mamba state row of the preset is not a multiple of ArenaConfig's row_align_bytes
// A Mamba conv state of 24 bytes, which the arena's 16-byte row alignment refuses; the control pads it to 32.
#include <string_view>

#include <unikv/presets.hpp>

using namespace unikv;

#ifdef UNIKV_COMPILE_FAIL_CONTROL
constexpr std::size_t conv_bytes = 32;
#else
constexpr std::size_t conv_bytes = 24;
#endif

struct Model {
    static constexpr std::string_view name = "model";
    using layout = MambaFullLayout;
    static constexpr ModelDescription model = {
        .full = {.layers = 1, .kv_heads = 1, .head_dim = 8, .dtype_bytes = 2},
        .mamba = {.layers = 2, .conv_state_bytes = conv_bytes, .temporal_state_bytes = 64},
    };
};

int main() { return static_cast<int>(arena_config<Model>({.arena_bytes = 4096}).arena_bytes == 0); }
