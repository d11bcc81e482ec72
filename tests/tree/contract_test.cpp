// The tree-core contract and the component-set rule, checked at compile time (the rejected sets are
// compile-fail tests in tests/compile_fail/tree_*.cpp).

#include <doctest/doctest.h>

#include "tree_test_support.hpp"

using namespace unikv;

namespace {
struct NotATree {
    using components = tree_component_set<Full>;
};
}  // namespace

static_assert(TreeCoreModel<RadixTree<Full, Swa, Mamba>>);
static_assert(TreeCoreModel<ReferenceTree<Full, Mamba>>);
static_assert(check_tree_core<RadixTree<Full>>());
static_assert(!is_tree_core_v<NotATree>);
static_assert(!has_match_prefix_v<NotATree>);

static_assert(tree_component_set<Full, Swa, Mamba>::valid);
static_assert(tree_component_set<Full, Mamba, Swa>::valid);  // only Full's place is fixed
static_assert(!tree_component_set<Swa, Full>::valid);
static_assert(!tree_component_set<Full, Full>::valid);
static_assert(!tree_component_set<Mamba>::valid);
static_assert(!tree_component_set<>::valid);
static_assert(!tree_component_set<Full, int>::valid);
static_assert(tree_component_set<Full, Mamba>::mask == ComponentMask::all().without(Component::swa));
static_assert(tree_component_set<Full>::mask == ComponentMask::of(Component::full));
static_assert(is_tree_component_v<Swa> && !is_tree_component_v<int>);
static_assert(Full::cascade_rank > Swa::cascade_rank && Swa::cascade_rank > Mamba::cascade_rank);

TEST_CASE_TEMPLATE("a tree checks its runtime configuration", Core, test::FastCore, test::RefCore) {
    using WithSwa = typename Core::template tree<Full, Swa>;
    using WithoutSwa = typename Core::template tree<Full>;
    CHECK_THROWS_AS(WithSwa(TreeConfig{.page_size = {4}}), unikv::logic_error);  // Swa needs a window
    CHECK_THROWS_AS(WithoutSwa(TreeConfig{.swa_window = 4}), unikv::logic_error);
    CHECK_THROWS_AS(WithoutSwa(TreeConfig{.page_size = {0}}), unikv::logic_error);
    CHECK_NOTHROW(WithSwa(TreeConfig{.page_size = {4}, .swa_window = 4}));
}

TEST_CASE_TEMPLATE("evicting a component outside the set is a caller error", Core, test::FastCore, test::RefCore) {
    typename Core::template tree<Full> tree({.page_size = {1}});
    CHECK_THROWS_AS((void)tree.evict(Component::swa, 1), unikv::logic_error);
    CHECK_THROWS_AS((void)tree.evict_host(Component::mamba, 1), unikv::logic_error);
    CHECK_THROWS_AS((void)tree.evict(Component::full, -1), unikv::logic_error);
}
