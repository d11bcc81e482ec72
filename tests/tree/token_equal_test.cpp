// tokens_equal, the compare of every walk step, against memcmp: every length up to 700 tokens at every start
// offset within a lane, equal runs and runs that differ in one bit of one token at each position (the first
// and last lane, the overlapping tail, each 1 KiB test point).
#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include <unikv/detail/tree/token_equal.hpp>

using unikv::TokenId;
using unikv::detail::tree::tokens_equal;

TEST_CASE("tokens_equal agrees with memcmp on every length, offset and single differing token") {
    std::vector<TokenId> a(720), b(720);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = b[i] = static_cast<TokenId>(i * 2654435761u);
    std::size_t checked = 0;
    for (std::size_t offset = 0; offset < 8; ++offset) {
        for (std::size_t n = 0; n + offset <= 700; ++n) {
            const TokenId* x = a.data() + offset;
            TokenId* y = b.data() + (offset * 3) % 8;
            std::memcpy(y, x, n * sizeof(TokenId));
            REQUIRE(tokens_equal(x, y, n));
            for (std::size_t at = 0; at < n; at += (n < 64 ? 1 : 7)) {
                y[at] ^= TokenId{1} << (at % 31);
                REQUIRE_FALSE(tokens_equal(x, y, n));
                y[at] = x[at];
                ++checked;
            }
            if (n > 0) {  // the last token, which only the overlapping tail lane reads
                y[n - 1] ^= 1;
                REQUIRE_FALSE(tokens_equal(x, y, n));
                y[n - 1] = x[n - 1];
            }
            CHECK(std::memcmp(x, y, n * sizeof(TokenId)) == 0);
        }
    }
    CHECK(checked > 100000);
}
