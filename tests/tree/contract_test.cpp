// The tree-core contract and the component-set rule, checked at compile time (the rejected sets are
// compile-fail tests in tests/compile_fail/tree_*.cpp).

#include <doctest/doctest.h>

#include <unikv/pools/layouts.hpp>

#include "tree_test_support.hpp"

using namespace unikv;

namespace {
struct NotATree {
    using components = tree_component_set<Full>;
};
// A tag whose impl names a type that is not a tree core, and one with no impl at all.
struct NotATreeCore {
    template <class... Cs>
    using impl = NotATree;
};
struct NoImpl {};
// A tag that ignores the components it is given.
struct FullOnlyCore {
    template <class... Cs>
    using impl = RadixTree<Full>;
};
}  // namespace

// The shipped tags are tree-core policies; the tests above and below run on both.
static_assert(TreeCorePolicy<RadixTreeCore> && TreeCorePolicy<ReferenceTreeCore>);
static_assert(std::is_same_v<RadixTreeCore::impl<Full, Swa>, RadixTree<Full, Swa>>);
static_assert(std::is_same_v<ReferenceTreeCore::impl<Full>, ReferenceTree<Full>>);
static_assert(!is_tree_core_policy_v<NotATreeCore> && has_tree_impl_v<NotATreeCore>);
static_assert(!is_tree_core_policy_v<NoImpl> && !has_tree_impl_v<NoImpl>);
static_assert(!TreeCorePolicy<RadixTree<Full>>);  // a tree is not a tag
static_assert(tree_impl_holds_mask_v<RadixTreeCore, ComponentMask::all()>);
static_assert(TreeCorePolicy<FullOnlyCore> && tree_impl_holds_mask_v<FullOnlyCore, ComponentMask::of(Component::full)>);
static_assert(!tree_impl_holds_mask_v<FullOnlyCore, ComponentMask::all()>);

// A tree derived from a component mask holds exactly that mask, in the order a tree lists components.
template <class Core>
constexpr bool derives_every_set() {
    constexpr auto full = ComponentMask::of(Component::full);
    static_assert(std::is_same_v<tree_core_t<Core, full>, typename Core::template impl<Full>>);
    static_assert(
        std::is_same_v<tree_core_t<Core, full.with(Component::swa)>, typename Core::template impl<Full, Swa>>);
    static_assert(
        std::is_same_v<tree_core_t<Core, full.with(Component::mamba)>, typename Core::template impl<Full, Mamba>>);
    static_assert(
        std::is_same_v<tree_core_t<Core, ComponentMask::all()>, typename Core::template impl<Full, Swa, Mamba>>);
    return true;
}
static_assert(derives_every_set<RadixTreeCore>() && derives_every_set<ReferenceTreeCore>());

// The tree of a layout's mask has the layout's components, for each of the four component sets.
template <class Core, class... Layouts>
constexpr bool matches_layouts() {
    return ((tree_core_t<Core, layout_components_v<Layouts>>::components::mask == layout_components_v<Layouts>) && ...);
}
static_assert(matches_layouts<RadixTreeCore, FullLayout, SwaFullLayout, MambaFullLayout, TriPoolLayout>());
static_assert(matches_layouts<ReferenceTreeCore, FullLayout, SwaFullLayout, MambaFullLayout, TriPoolLayout>());

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

TEST_CASE_TEMPLATE("a tree checks its runtime configuration", Core, RadixTreeCore, ReferenceTreeCore) {
    using WithSwa = typename Core::template impl<Full, Swa>;
    using WithoutSwa = typename Core::template impl<Full>;
    CHECK_THROWS_AS(WithSwa(TreeConfig{.page_size = {4}}), unikv::logic_error);  // Swa needs a window
    CHECK_THROWS_AS(WithoutSwa(TreeConfig{.swa_window = 4}), unikv::logic_error);
    CHECK_THROWS_AS(WithoutSwa(TreeConfig{.page_size = {0}}), unikv::logic_error);
    CHECK_NOTHROW(WithSwa(TreeConfig{.page_size = {4}, .swa_window = 4}));
}

TEST_CASE_TEMPLATE("evicting a component outside the set is a caller error", Core, RadixTreeCore, ReferenceTreeCore) {
    typename Core::template impl<Full> tree({.page_size = {1}});
    CHECK_THROWS_AS((void)tree.evict(Component::swa, 1), unikv::logic_error);
    CHECK_THROWS_AS((void)tree.evict_host(Component::mamba, 1), unikv::logic_error);
    CHECK_THROWS_AS((void)tree.evict(Component::full, -1), unikv::logic_error);
}

// Runs a derived tree: it caches and walks a key, and accepts exactly the layout's components as eviction targets.
template <class Core, class Layout>
void check_derived_tree(TreeConfig config) {
    constexpr ComponentMask mask = layout_components_v<Layout>;
    tree_core_t<Core, mask> tree(config);
    const auto key = test::run(1, 4);
    auto ins = tree.insert({.tokens = key}, {.pages = test::vpages(10, 2)});
    ins.actions.mark_executed();
    CHECK(tree.match_prefix({.tokens = key}).full_length == 4);
    for (Component c : all_components) {
        bool threw = false;
        try {
            auto ev = tree.evict(c, 0);
            ev.actions.mark_executed();
        } catch (const unikv::logic_error&) {
            threw = true;
        }
        CHECK_MESSAGE(threw == !mask.has(c), to_string(c));
    }
}

TEST_CASE_TEMPLATE("a tree derived from a layout's components has exactly those components", Core, RadixTreeCore,
                   ReferenceTreeCore) {
    check_derived_tree<Core, FullLayout>({.page_size = {2}});
    check_derived_tree<Core, SwaFullLayout>({.page_size = {2}, .swa_window = 2});
    check_derived_tree<Core, MambaFullLayout>({.page_size = {2}});
    check_derived_tree<Core, TriPoolLayout>({.page_size = {2}, .swa_window = 2});
}
