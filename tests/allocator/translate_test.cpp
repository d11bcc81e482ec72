// The batched translation gathers against the one-id definition (`TranslationTable::physical_token`), on
// inputs built to break the page-run fast path: runs that cross pages, unbound pages inside a block, negative
// and out-of-range ids, ragged starts and tails, and every block length around the block size.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <unikv/pools/page_table.hpp>
#include <unikv/pools/translate.hpp>

namespace {

using namespace unikv;

struct TableFixture {
    PageTable table;
    std::vector<std::int32_t> bound;  // virtual pages with a physical page

    TableFixture(std::int32_t pages, std::int32_t page_size, std::mt19937& rng) : table(pages, pages, PageSize{page_size}) {
        std::vector<std::int32_t> physical(static_cast<std::size_t>(pages - 1));
        for (std::int32_t p = 1; p < pages; ++p) physical[static_cast<std::size_t>(p - 1)] = p;
        std::shuffle(physical.begin(), physical.end(), rng);
        for (std::int32_t v = 1; v < pages; ++v) {
            if (v % 7 == 3) continue;  // leave some pages unbound: they must land on the sink
            table.bind(v, physical[static_cast<std::size_t>(v - 1)]);
            bound.push_back(v);
        }
    }
};

// Request-shaped ids (whole pages in order) with one kind of damage applied at a random place.
std::vector<VirtualToken> make_input(const TableFixture& f, std::int32_t page_size, std::size_t tokens, int damage,
                                     std::mt19937& rng) {
    std::vector<VirtualToken> in;
    if (damage >= 9) {  // a row of consecutive token ids from anywhere (possibly past the table's end)
        const auto start = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(f.table.num_virtual() * page_size));
        for (std::size_t i = 0; i < tokens; ++i) in.emplace_back(start + static_cast<std::int32_t>(i));
        if (damage == 10 && !in.empty()) in[rng() % in.size()] = VirtualToken{static_cast<std::int32_t>(rng() % 5000)};
        return in;
    }
    std::uniform_int_distribution<std::size_t> pick(0, f.bound.size() - 1);
    const std::int32_t start = damage == 5 ? static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(page_size)) : 0;
    while (in.size() < tokens) {
        const std::int32_t v = f.bound[pick(rng)];
        for (std::int32_t o = start; o < page_size && in.size() < tokens; ++o) in.emplace_back(v * page_size + o);
    }
    if (in.empty()) return in;
    const std::int32_t num_virtual = f.table.num_virtual();
    for (std::uint32_t hits = 1 + rng() % 3; hits > 0; --hits) {  // one to three damaged places
    const std::size_t at = rng() % in.size();
    switch (damage) {
        case 1: in[at] = VirtualToken{in[at].value() + page_size}; break;                  // crosses into the next page
        case 2: in[at] = VirtualToken{3 * page_size + in[at].value() % page_size}; break;  // an unbound page
        case 3: in[at] = VirtualToken{-1 - static_cast<std::int32_t>(rng() % 1000)}; break;
        case 4: in[at] = VirtualToken{num_virtual * page_size + static_cast<std::int32_t>(rng() % 100)}; break;
        case 6: std::swap(in[at], in[rng() % in.size()]); break;                            // out of order
        case 7:  // a whole run of an unbound page
            for (std::size_t i = at - at % static_cast<std::size_t>(page_size);
                 i < in.size() && i < at - at % static_cast<std::size_t>(page_size) + static_cast<std::size_t>(page_size); ++i)
                in[i] = VirtualToken{3 * page_size + static_cast<std::int32_t>(i % static_cast<std::size_t>(page_size))};
            break;
        case 8: in[at] = VirtualToken{rng() % 2 == 0 ? std::numeric_limits<std::int32_t>::min()
                                                     : std::numeric_limits<std::int32_t>::max()}; break;
        default: break;
    }
    }
    return in;
}

std::vector<PhysicalToken> expected_of(const TranslationTable& t, const std::vector<VirtualToken>& in) {
    std::vector<PhysicalToken> out;
    for (const VirtualToken v : in) {
        const std::int32_t page = v.value() < 0 ? -1 : v.value() / static_cast<std::int32_t>(t.page_size);
        const std::int32_t p = page >= 0 && page < static_cast<std::int32_t>(t.sentinel) ? t.v2p[page] : -1;
        out.emplace_back(p < 0 ? 0 : p * static_cast<std::int32_t>(t.page_size) + v.value() % static_cast<std::int32_t>(t.page_size));
    }
    return out;
}

template <std::uint32_t PageSize>
std::vector<std::vector<PhysicalToken>> through_lanes(const TranslationTable& t, const std::vector<VirtualToken>& in) {
    std::vector<std::vector<PhysicalToken>> outs;
#if UNIKV_HAS_VECTOR_TYPES
    outs.emplace_back(in.size(), PhysicalToken{-7});
    detail::translate_tokens_in_blocks(t, in, outs.back(), detail::translate_block_pow2_16<PageSize>);
#endif
#if UNIKV_HAS_AVX2_DISPATCH
    if constexpr (PageSize >= 8) {
        if (__builtin_cpu_supports("avx2")) {
            outs.emplace_back(in.size(), PhysicalToken{-7});
            detail::translate_tokens_in_blocks(t, in, outs.back(), detail::translate_block_pow2_32<PageSize>);
        }
    }
#endif
    return outs;
}

std::vector<std::vector<PhysicalToken>> through_unit_lanes(const TranslationTable& t, const std::vector<VirtualToken>& in) {
    std::vector<std::vector<PhysicalToken>> outs;
#if UNIKV_HAS_VECTOR_TYPES
    outs.emplace_back(in.size(), PhysicalToken{-7});
    detail::translate_tokens_in_blocks(t, in, outs.back(), detail::translate_block_unit_run_16);
#endif
#if UNIKV_HAS_AVX2_DISPATCH
    if (__builtin_cpu_supports("avx2")) {
        outs.emplace_back(in.size(), PhysicalToken{-7});
        detail::translate_tokens_in_blocks(t, in, outs.back(), detail::translate_block_unit_run_32);
    }
#endif
    return outs;
}

std::size_t lane_widths(std::int32_t page_size) {
    std::size_t n = UNIKV_HAS_VECTOR_TYPES;
#if UNIKV_HAS_AVX2_DISPATCH
    if ((page_size == 1 || page_size >= 8) && __builtin_cpu_supports("avx2")) ++n;
#endif
    (void)page_size;
    return n;
}

std::vector<std::vector<PhysicalToken>> through_each_lane_width(const TranslationTable& t, const std::vector<VirtualToken>& in,
                                                                std::int32_t page_size) {
    switch (page_size) {
        case 1: return through_unit_lanes(t, in);
        case 4: return through_lanes<4>(t, in);
        case 8: return through_lanes<8>(t, in);
        case 16: return through_lanes<16>(t, in);
        case 32: return through_lanes<32>(t, in);
        case 64: return through_lanes<64>(t, in);
        case 128: return through_lanes<128>(t, in);
        default: return through_lanes<256>(t, in);
    }
}

}  // namespace

TEST_CASE("translation writes min(in, out) ids and nothing past the shorter output") {
    std::mt19937 rng(11);
    for (const std::int32_t page_size : {1, 3, 16, 64}) {
        TableFixture f(40, page_size, rng);
        const std::vector<VirtualToken> in = make_input(f, page_size, 8 * static_cast<std::size_t>(page_size) + 3, 0, rng);
        const std::vector<PhysicalToken> expected = expected_of(f.table.translation(), in);
        for (const std::size_t shorter : {std::size_t{0}, std::size_t{1}, in.size() / 2, in.size() - 1}) {
            std::vector<PhysicalToken> out(in.size(), PhysicalToken{-7});
            f.table.translate(in, std::span(out).first(shorter));
            CHECK(std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(shorter), expected.begin()));
            CHECK(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(shorter), out.end(),
                              [](PhysicalToken p) { return p == PhysicalToken{-7}; }));
        }
        std::vector<VirtualPage> pages(5, VirtualPage{2});
        std::vector<PhysicalPage> page_out(5, PhysicalPage{-7});
        f.table.translate(pages, std::span(page_out).first(2));
        CHECK(page_out[2] == PhysicalPage{-7});
        CHECK(page_out[1].value() == f.table.physical_of(2));
    }
}

TEST_CASE("token translation matches the one-id definition on damaged and ragged inputs") {
    std::mt19937 rng(2026);
    for (const std::int32_t page_size : {1, 2, 3, 4, 8, 16, 32, 64, 128, 256}) {
        CAPTURE(page_size);
        TableFixture f(97, page_size, rng);
        const TranslationTable t = f.table.translation();
        const std::size_t block = detail::translate_block_groups * static_cast<std::size_t>(page_size);
        for (const std::size_t tokens : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(page_size) - 1,
                                         static_cast<std::size_t>(page_size) + 1, block - 1, block, block + 1,
                                         3 * block + 5}) {
            for (int damage = 0; damage <= 10; ++damage) {
                CAPTURE(tokens);
                CAPTURE(damage);
                const std::vector<VirtualToken> in = make_input(f, page_size, tokens, damage, rng);
                const std::vector<PhysicalToken> expected = expected_of(t, in);
                std::vector<PhysicalToken> out(in.size(), PhysicalToken{-7});
                f.table.translate(in, out);
                CHECK(out == expected);
                for (std::size_t i = 0; i < in.size(); ++i) REQUIRE(t.physical_token(in[i].value()) == expected[i].value());
                if (page_size == 1 || (page_size >= 4 && (page_size & (page_size - 1)) == 0)) {
                    // Every lane width, whatever the CPU picks at run time.
                    CHECK(through_each_lane_width(t, in, page_size) == std::vector<std::vector<PhysicalToken>>(lane_widths(page_size), expected));
                }
            }
        }
    }
}

TEST_CASE("page translation maps unbound, negative and out-of-range ids to the sink") {
    std::mt19937 rng(5);
    TableFixture f(33, 16, rng);
    std::vector<VirtualPage> in{VirtualPage{0}, VirtualPage{3}, VirtualPage{-1}, VirtualPage{33}, VirtualPage{1 << 30}};
    for (const std::int32_t v : f.bound) in.emplace_back(v);
    std::vector<PhysicalPage> out(in.size());
    f.table.translate(in, out);
    CHECK(out[0] == PhysicalPage{0});
    CHECK(out[1] == PhysicalPage{0});  // page 3 is left unbound by the fixture
    CHECK(out[2] == PhysicalPage{0});
    CHECK(out[3] == PhysicalPage{0});
    CHECK(out[4] == PhysicalPage{0});
    for (std::size_t i = 5; i < in.size(); ++i) {
        CHECK(out[i].value() == f.table.physical_of(in[i].value()));
        CHECK(f.table.virtual_of(out[i].value()) == in[i].value());
    }
}

TEST_CASE("a page table refuses bad sizes and token ids that overflow int32, before building anything") {
    CHECK_THROWS_AS(PageTable(0, 4, PageSize{16}), unikv::logic_error);
    CHECK_THROWS_AS(PageTable(-5, 4, PageSize{16}), unikv::logic_error);  // not a length_error from the vectors
    CHECK_THROWS_AS(PageTable(4, 4, PageSize{0}), unikv::logic_error);
    CHECK_THROWS_AS(PageTable((1 << 27) + 1, 4, PageSize{16}), unikv::logic_error);  // token 2^31 overflows
    CHECK_THROWS_AS(PageTable(4, (1 << 27) + 1, PageSize{16}), unikv::logic_error);
    const PageTable ok(1 << 10, 1 << 10, PageSize{16});
    CHECK(ok.translation().physical_token(-1) == 0);  // a negative id reaches the sentinel, hence the sink
}
