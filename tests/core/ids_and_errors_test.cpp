#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include <unikv/error.hpp>
#include <unikv/ids.hpp>

using namespace unikv;

TEST_CASE("strong ids of different domains do not convert into each other") {
    static_assert(!std::is_convertible_v<VirtualPage, PhysicalPage>);
    static_assert(!std::is_convertible_v<PhysicalPage, HostPage>);
    static_assert(!std::is_convertible_v<std::int32_t, VirtualPage>);
    static_assert(std::is_trivially_copyable_v<VirtualPage>);
    static_assert(sizeof(VirtualPage) == sizeof(std::int32_t));
    CHECK(VirtualPage{}.value() == -1);
    CHECK_FALSE(VirtualPage::none().is_valid());
    CHECK(PhysicalPage{0}.is_valid());
    CHECK(VirtualPage{3} < VirtualPage{4});
}

TEST_CASE("page and token conversions use the given page size") {
    constexpr PageSize ps{16};
    CHECK(page_of(VirtualToken{33}, ps) == VirtualPage{2});
    CHECK(token_of(VirtualPage{2}, ps, 1) == VirtualToken{33});
    CHECK(page_of(PhysicalToken{-1}, ps) == PhysicalPage::none());
    CHECK(token_of(PhysicalPage{5}, PageSize{1}) == PhysicalToken{5});
}

namespace {
int checked_free(VirtualPage p) {
    UNIKV_EXPECTS(p.value() != 7, "page ", p, " is already free");
    return p.value();
}
}  // namespace

TEST_CASE("a broken precondition names the call, the condition and the bad value") {
    CHECK(checked_free(VirtualPage{3}) == 3);
    try {
        (void)checked_free(VirtualPage{7});
        FAIL("expected unikv::logic_error");
    } catch (const unikv::logic_error& e) {
        const std::string msg = e.what();
        CHECK(msg.find("checked_free") != std::string::npos);
        CHECK(msg.find("p.value() != 7") != std::string::npos);
        CHECK(msg.find("page 7 is already free") != std::string::npos);
    }
}
