#pragma once
// Definitions of `CacheCore`'s calls on a request handle (`Sequence`, cache/sequence.hpp; cache.hpp).

#include <algorithm>
#include <utility>

namespace unikv::detail::cache {

inline const char* status_name(Sequence::Status s) noexcept {
    switch (s) {
        case Sequence::Status::idle: return "idle (never admitted, finished or released)";
        case Sequence::Status::running: return "running";
        case Sequence::Status::retracted: return "retracted";
    }
    return "unknown";
}

template <class P>
void CacheCore<P>::expect_sequence(const Sequence& seq, Sequence::Status want, const char* call) const {
    if (seq.status_ != Sequence::Status::idle && seq.cache_ != id_) {
        detail::misuse(call, "the sequence runs in another cache; drive it through the cache that admitted it");
    }
    if (seq.status_ != want) {
        detail::misuse(call, "the sequence is ", status_name(seq.status_), ", not ", status_name(want));
    }
}

template <class P>
AllocResult CacheCore<P>::alloc_own_rows(std::int32_t prefix, std::int32_t end) {
    decode_out_.resize(static_cast<std::size_t>(end - prefix));
    const std::int32_t prefix_lens[] = {prefix};
    const std::int32_t seq_lens[] = {end};
    const VirtualToken last[] = {VirtualToken{}};  // the prefix ends on a page boundary: no row to continue
    return alloc_extend({prefix_lens, seq_lens, last}, decode_out_);
}

template <class P>
void CacheCore<P>::reset(Sequence& seq) noexcept {
    seq.status_ = Sequence::Status::idle;
    seq.tokens_.clear();
    seq.rows_.clear();
    seq.fill_ = seq.prefix_ = seq.compute_from_ = seq.swa_start_ = seq.decoded_ = seq.max_new_ = 0;
    seq.backup_prefix_ = seq.restored_ = 0;
    seq.retain_ = RetainPoints{};
    seq.load_id_ = seq.batch_mark_ = 0;
    seq.node_ = NodeRef{};
    seq.state_ = StateId{};
}

template <class P>
Admission CacheCore<P>::start(Sequence& seq, Admission&& a, start_kind kind, TokenKey prompt, std::int32_t max_new) {
    const std::int32_t prefix = a.prefix_length;
    const std::int32_t end = prefix + a.extend_length;
    const auto refuse = [&](Pages missing) {
        if (!a.lock.empty()) unlock(std::move(a.lock));
        Admission out;
        out.refusal = {.cause = RefusalCause::no_room, .missing = missing};
        return out;
    };
    if (const AllocResult r = alloc_own_rows(prefix, end); !r) return refuse(r.missing);  // a match is whole pages
    // A handle starts without a state: a new one has none, a retraction freed it, a chunk's checkpoint gave it to
    // the tree. It gets a fresh slot holding a copy of the prefix's checkpoint.
    UNIKV_ASSERT(!seq.state_.is_valid());
    StateId fresh{};
    if constexpr (has_mamba) {
        StateId out[1];
        if (const AllocResult r = alloc_state(out); !r) {
            alloc_.free(page_list(decode_out_));
            return refuse(r.missing);
        }
        fresh = out[0];
    }
    // Committed from here on.
    if (kind == start_kind::fresh) {  // `Cache::admit` reserved the room (before admitting: a throw there is harmless)
        seq.tokens_.assign(prompt.tokens.begin(), prompt.tokens.end());
        seq.ns_ = prompt.ns;
        seq.batch_mark_ = 0;
        seq.fill_ = static_cast<std::int32_t>(prompt.tokens.size());
        seq.max_new_ = max_new;
        seq.decoded_ = 0;
        seq.cache_ = id_;
    }
    seq.rows_.resize(static_cast<std::size_t>(end));
    std::copy(decode_out_.begin(), decode_out_.end(), seq.rows_.begin() + prefix);
    if (kind == start_kind::recompute) {  // a retracted handle recomputes every row it had
        if constexpr (can_retract) discard(seq.backup_);
        seq.fill_ = static_cast<std::int32_t>(seq.tokens_.size());
    }
    if (fresh.is_valid()) seq.state_ = fresh;
    LockReceipt previous = std::exchange(seq.lock_, std::move(a.lock));
    seq.node_ = a.node;
    seq.prefix_ = seq.compute_from_ = seq.swa_start_ = prefix;
    seq.load_id_ = a.load_id;
    seq.restored_ = 0;
    seq.status_ = Sequence::Status::running;
    if (kind == start_kind::fresh) {
        seq.retain_ = RetainPoints::of(retention_, seq.fill_, a.cached_length, page_size(Component::full));
    } else if (retention_.branch_points && a.cached_length > prefix) {
        seq.retain_.branch = a.cached_length;  // the path grew meanwhile: it leaves it further on
    }
    if (a.load_id == 0 && prefix > 0) {
        prefix_rows(seq.node_, std::span<VirtualToken>(seq.rows_).first(static_cast<std::size_t>(prefix)));
        if constexpr (has_mamba) alloc_.copy_state(tree_.node_info(seq.node_).state, seq.state_);
    }
    if (!previous.empty()) unlock(std::move(previous));
    return std::move(a);
}

template <class P>
void CacheCore<P>::bind_loaded_prefix(Sequence& seq) {
    const std::uint64_t id = seq.load_id_;
    const bool pending = std::any_of(loads_.begin(), loads_.end(), [&](const Ticket& t) { return t.tag.id == id; });
    if (pending) {
        detail::misuse("rows", "the sequence's prefix is still loading (load ", id,
                       "); start_loading, then read its rows after loading_check acknowledged the load");
    }
    // A failed copy of any part (FULL rows, the window's SWA rows, the state) leaves the device short of the
    // prefix: the device match says so for every component. Cold: once per loaded admission.
    const MatchResult m = tree_.match_prefix(
        {std::span<const TokenId>(seq.tokens_).first(static_cast<std::size_t>(seq.prefix_)), seq.ns_});
    if (m.device_length < seq.prefix_) {
        throw transfer_error(detail::concat("unikv: rows: load-back ", id, " of the sequence's prefix failed (the device "
                                            "serves ", m.device_length, " of its ", seq.prefix_, " tokens); release the "
                                            "sequence and admit it again"));
    }
    prefix_rows(m.device_node, std::span<VirtualToken>(seq.rows_).first(static_cast<std::size_t>(seq.prefix_)));
    if constexpr (has_mamba) alloc_.copy_state(tree_.node_info(m.device_node).state, seq.state_);
    seq.load_id_ = 0;
}

template <class P>
std::span<const VirtualToken> CacheCore<P>::rows(Sequence& seq) {
    expect_sequence(seq, Sequence::Status::running, "rows");
    if (seq.load_id_ != 0) bind_loaded_prefix(seq);
    return seq.rows_;
}

template <class P>
void CacheCore<P>::decode_misuse(const Sequence* s, std::uint64_t mark, std::size_t at) const {
    UNIKV_EXPECTS(s != nullptr, "decode: the batch names no sequence at position ", at);
    expect_sequence(*s, Sequence::Status::running, "decode");
    if (s->batch_mark_ == mark) detail::misuse("decode", "a sequence is named twice in the batch");
    if (s->prefilling()) {
        detail::misuse("decode", "a sequence is still prefilling (", s->length(), " of ", s->fill_,
                       " prompt rows); checkpoint it and extend it first");
    }
    if (s->load_id_ != 0) detail::misuse("decode", "a sequence's loaded prefix was never read; call rows first");
    detail::misuse("decode", "a sequence decoded its max_new_tokens (", s->max_new_, "); finish it");
}

template <class P>
AllocResult CacheCore<P>::decode(std::span<Sequence* const> batch, std::span<const TokenId> next) {
    UNIKV_EXPECTS(next.size() == batch.size(), "decode: ", next.size(), " tokens for a batch of ", batch.size(),
                  "; give each sequence the token its last forward sampled");
    const std::uint64_t mark = ++decode_mark_;
    const PageSize page{page_size(Component::full)};
    const std::int32_t window = has_swa ? window_tokens() : 0;
    decode_lens_.resize(batch.size());
    decode_last_.resize(batch.size());
    swa_slid_.clear();
    swa_slid_.reserve(batch.size());  // a step slides a page per handle: grows with the batch only
    const auto collect = [&](std::size_t i) {  // reads the handle only: a misuse later in the batch changes nothing
        const Sequence* s = batch[i];
        decode_lens_[i] = s->length() + 1;
        decode_last_[i] = s->rows_.back();
        collect_slid(*s, s->length(), page, window);  // its cursor moves once the batch's pages are freed
    };
    bool first_decodes = false;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        Sequence* s = batch[i];
        if (s == nullptr || s->status_ != Sequence::Status::running || s->cache_ != id_ || s->batch_mark_ == mark ||
            s->prefilling() || s->load_id_ != 0 || s->decoded_ >= s->max_new_) [[unlikely]] {
            decode_misuse(s, mark, i);
        }
        s->batch_mark_ = mark;
        first_decodes |= s->decoded_ == 0;
        collect(i);
    }
    // Every handle checked: a handle's first decode caches what the retention keeps of its prompt before its
    // window slides past it (once per request; its prefix moves and its last row's page may be read again), and
    // the batch is collected again.
    if constexpr (has_swa || has_mamba) {
        if (first_decodes) [[unlikely]] {
            for (Sequence* s : batch)
                if (s->decoded_ == 0) keep_prompt_end(*s);
            swa_slid_.clear();
            for (std::size_t i = 0; i < batch.size(); ++i) collect(i);
        }
    }
    // The windows slide before the allocation, so the rows they free serve it; a row before the window of the
    // new row's query is never read again, so a shortfall below leaves them slid.
    free_slid();
    // A decode says its handles' rows are all computed (the forward before it sampled `next`), shortfall or not;
    // the cursors follow the windows at once, so an allocation that throws leaves them true.
    for (Sequence* s : batch) {
        s->compute_from_ = s->length();
        advance_window(*s, s->length(), page, window);
    }
    decode_out_.resize(batch.size());
    const AllocResult r = alloc_decode({decode_lens_, decode_last_}, decode_out_);
    if (!r) return r;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        Sequence& s = *batch[i];
        s.rows_.push_back(decode_out_[i]);
        s.tokens_.push_back(next[i]);
        ++s.decoded_;
    }
    return r;
}

template <class P>
void CacheCore<P>::collect_slid(const Sequence& seq, std::int32_t upto, PageSize page, std::int32_t window) {
    if constexpr (has_swa) {
        // Only its own pages (from the prefix on): the tree's keep their window for other requests.
        for (std::int32_t p = seq.swa_start_; p + page.tokens <= upto - window; p += page.tokens)
            swa_slid_.push_back(page_of(seq.rows_[static_cast<std::size_t>(p)], page));
    } else {
        (void)seq;
        (void)upto;
        (void)page;
        (void)window;
    }
}

template <class P>
void CacheCore<P>::advance_window(Sequence& seq, std::int32_t upto, PageSize page, std::int32_t window) noexcept {
    if (const std::int32_t slid = upto - window - seq.swa_start_; has_swa && slid >= page.tokens)
        seq.swa_start_ += slid / page.tokens * page.tokens;  // past the pages `collect_slid` named
}

template <class P>
void CacheCore<P>::slide_window(Sequence& seq, std::int32_t upto) {
    const PageSize page{page_size(Component::full)};
    swa_slid_.clear();
    collect_slid(seq, upto, page, window_tokens());
    free_slid();
    advance_window(seq, upto, page, window_tokens());
}

template <class P>
void CacheCore<P>::free_slid() {
    if constexpr (has_swa) {
        if (!swa_slid_.empty()) alloc_.free_swa(swa_slid_);
    }
}

template <class P>
CacheInsert CacheCore<P>::checkpoint(Sequence& seq, StateId state_at_pages) {
    expect_sequence(seq, Sequence::Status::running, "checkpoint");
    if (seq.load_id_ != 0) bind_loaded_prefix(seq);
    return checkpoint_rows(seq, state_at_pages);
}

template <class P>
CacheInsert CacheCore<P>::checkpoint_rows(Sequence& seq, StateId state_at_pages) {
    const std::int32_t whole = whole_rows(seq);
    if constexpr (has_mamba) {
        if (state_at_pages.is_valid()) {  // every check before anything changes
            alloc_.expect_allocated(std::span<const StateId>(&state_at_pages, 1), "checkpoint");
            UNIKV_EXPECTS(state_at_pages != seq.state_ && !alloc_.status(state_at_pages).held, "checkpoint: "
                          "state_at_pages is the sequence's running state or a cached one; give a slot of its own "
                          "holding the state after the last whole page");
        }
    } else {
        UNIKV_EXPECTS(!state_at_pages.is_valid(), "checkpoint: a state for a layout without Mamba");
    }
    keep_windows(seq, whole);  // before the state changes hands: it may throw
    StateId state{};
    if constexpr (has_mamba) {
        if (whole > seq.prefix_ && whole == seq.length() && seq.state_.is_valid()) {
            if (seq.prefilling()) {  // a chunk: the tree takes the state itself; `extend` starts from a copy
                state = std::exchange(seq.state_, StateId{});
            } else if (StateId out[1]; alloc_state(out)) {  // else cached without a state (pages still serve)
                alloc_.copy_state(seq.state_, out[0]);
                state = out[0];
            }
            if (state_at_pages.is_valid()) alloc_.free_state(std::span<const StateId>(&state_at_pages, 1));
        } else {
            state = state_at_pages;
        }
    }
    if (whole <= seq.prefix_) {
        if constexpr (has_mamba) {
            if (state.is_valid()) alloc_.free_state(std::span<const StateId>(&state, 1));
        }
        seq.compute_from_ = seq.length();
        return CacheInsert{.node = seq.node_, .prefix_length = seq.prefix_, .first_write = next_write_};
    }
    const CacheInsert done = cache_prefix(seq, whole, state, seq.retain_.class_at(whole));
    seq.compute_from_ = seq.length();
    return done;
}

template <class P>
CacheInsert CacheCore<P>::cache_prefix(Sequence& seq, std::int32_t at, StateId state, std::uint8_t window_class) {
    slide_window(seq, at);  // the tree takes only the window's SWA rows
    const auto rows = std::span<VirtualToken>(seq.rows_).first(static_cast<std::size_t>(at));
    // The handle follows as soon as the tree holds the pages: a write-through that throws after it leaves the
    // handle true (its prefix, lock and rows the tree's).
    return insert_then({std::span<const TokenId>(seq.tokens_).first(static_cast<std::size_t>(at)), seq.ns_},
                       {.pages = page_list(rows), .swa_evicted = std::min(seq.swa_start_, at), .state = state,
                        .window_class = window_class},
                       [&](const CacheInsert& done) {
                           LockReceipt previous = std::exchange(seq.lock_, lock(done.node));
                           unlock(std::move(previous));
                           seq.node_ = done.node;
                           seq.prefix_ = at;
                           seq.swa_start_ = std::max(seq.swa_start_, at);
                           // The tree kept its own page where it had the tokens already (and freed the
                           // request's): read them again.
                           prefix_rows(seq.node_, rows);
                       });
}

template <class P>
void CacheCore<P>::keep_windows(Sequence& seq, std::int32_t whole) {
    if constexpr (has_swa) {
        for (std::int32_t at = seq.retain_.next_after(seq.prefix_, whole); at < whole;
             at = seq.retain_.next_after(at, whole)) {
            // A window it already slid past is not whole any more: nothing to keep there.
            if (seq.swa_start_ <= std::max(seq.prefix_, at - window_tokens()))
                static_cast<void>(cache_prefix(seq, at, StateId{}, seq.retain_.class_at(at)));
        }
    } else {
        (void)seq;
        (void)whole;
    }
}

template <class P>
void CacheCore<P>::keep_prompt_end(Sequence& seq) {
    if (retention_.prompt_ends) {
        static_cast<void>(checkpoint_rows(seq, StateId{}));  // its prompt's whole pages, with a state where it can
    } else {
        keep_windows(seq, whole_rows(seq));
    }
}

template <class P>
bool CacheCore<P>::retract(Sequence& seq) {
    expect_sequence(seq, Sequence::Status::running, "retract");
    const std::span<const VirtualPage> own = page_list(own_rows(seq));
    bool backed = false;
    if constexpr (can_retract) {
        // Only rows known computed are worth a copy: a decoding handle past its prefix, its prefix read.
        if (!seq.prefilling() && seq.compute_from_ > seq.prefix_ && seq.load_id_ == 0) {
            RetractionBackup b = backup({.own = own, .prefix_tokens = seq.prefix_, .seq_len = seq.length(),
                                         .window_tokens = restore_window(seq, seq.length())});
            if (b) {
                static_cast<void>(seq.backup_ = std::move(b));  // (nvcc reads the class's [[nodiscard]] on operator=)
                seq.backup_prefix_ = seq.prefix_;
                backed = true;
            }
        }
    }
    alloc_.free(own);
    if constexpr (has_mamba) {
        if (seq.state_.is_valid()) alloc_.free_state(std::span<const StateId>(&seq.state_, 1));
    }
    unlock(std::move(seq.lock_));
    if (!backed) seq.fill_ = static_cast<std::int32_t>(seq.tokens_.size());  // recomputes every row it had
    seq.rows_.clear();
    if (!backed) seq.compute_from_ = 0;  // else the rows known computed: a restore recomputes the rest
    seq.prefix_ = seq.swa_start_ = 0;
    seq.node_ = NodeRef{};
    seq.state_ = StateId{};
    seq.status_ = Sequence::Status::retracted;
    return backed;
}

template <class P>
bool CacheCore<P>::copy_back(Sequence& seq, Admission& a) {
    if constexpr (can_retract) {
        const std::int32_t prefix = seq.backup_prefix_;
        const std::int32_t end = static_cast<std::int32_t>(seq.tokens_.size());
        if (a.chunked || a.load_id != 0 || a.prefix_length < prefix) return false;
        if (!alloc_own_rows(prefix, end)) return false;
        const std::span<const VirtualPage> own = page_list(decode_out_);
        const std::int32_t window = restore_window(seq, end);
        if (!restore(seq.backup_, {.own = own, .prefix_tokens = prefix, .seq_len = end, .window_tokens = window})) {
            alloc_.free(own);  // the copy failed: `start` recomputes (and discards the backup)
            return false;
        }
        // Only the window's SWA rows came back (from its first whole page): the own pages before it are
        // tombstoned, so that no later insert caches their SWA rows.
        std::int32_t swa_start = prefix;
        if constexpr (has_swa) {
            const std::int32_t page = page_size(Component::full);
            swa_start = std::clamp(std::max(0, end - window) / page * page, prefix, end / page * page);
            if (swa_start > prefix) alloc_.free_swa(own.first(static_cast<std::size_t>((swa_start - prefix) / page)));
        }
        // The admission's prefix is at least the old one: its rows up to the old prefix, the copies after it.
        seq.rows_.resize(static_cast<std::size_t>(std::max(end, a.prefix_length)));
        prefix_rows(a.node, seq.rows_);
        seq.rows_.resize(static_cast<std::size_t>(end));
        std::copy(decode_out_.begin(), decode_out_.end(), seq.rows_.begin() + prefix);
        seq.lock_ = std::move(a.lock);
        seq.node_ = a.node;
        seq.prefix_ = prefix;
        seq.swa_start_ = swa_start;
        seq.compute_from_ = std::clamp(seq.compute_from_, prefix, end);  // rows not known computed are computed again
        seq.restored_ = end - prefix;
        seq.status_ = Sequence::Status::running;
        return true;
    } else {
        (void)seq;
        (void)a;
        return false;
    }
}

template <class P>
CacheInsert CacheCore<P>::finish(Sequence& seq, std::uint8_t retention) {
    expect_sequence(seq, Sequence::Status::running, "finish");
    if (seq.load_id_ != 0) bind_loaded_prefix(seq);
    const std::int32_t whole = whole_rows(seq);
    keep_windows(seq, whole);
    slide_window(seq, seq.length());  // the tree takes only the window's SWA rows
    const CacheInsert done = finish({std::span<const TokenId>(seq.tokens_).first(seq.rows_.size()), seq.ns_}, seq.rows_,
                                    std::move(seq.lock_),
                                    {.swa_evicted = seq.swa_start_, .state = seq.state_, .retention = retention,
                                     .window_class = std::max(window_class_end, seq.retain_.class_at(whole))});
    reset(seq);
    return done;
}

template <class P>
void CacheCore<P>::release(Sequence& seq) {
    if (seq.status_ == Sequence::Status::retracted) {
        expect_sequence(seq, Sequence::Status::retracted, "release");
        if constexpr (can_retract) discard(seq.backup_);
    } else {
        expect_sequence(seq, Sequence::Status::running, "release");
        alloc_.free(page_list(own_rows(seq)));
        if constexpr (has_mamba) {
            if (seq.state_.is_valid()) alloc_.free_state(std::span<const StateId>(&seq.state_, 1));
        }
        unlock(std::move(seq.lock_));
    }
    reset(seq);
}

}  // namespace unikv::detail::cache
