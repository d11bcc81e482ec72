// The simulator's inputs: the Mooncake reader (good lines, every kind of bad line, the carried trace), the
// trace's token ids, the summary's reuse ceiling, the seeded generators, sizes and names on the command line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <unikv_sim/byte_size.hpp>
#include <unikv_sim/continuations.hpp>
#include <unikv_sim/generators.hpp>
#include <unikv_sim/mooncake_reader.hpp>
#include <unikv_sim/options.hpp>
#include <unikv_sim/trace_summary.hpp>

using namespace unikv::sim;
using unikv::TokenId;

namespace {

Trace read(std::string_view text, std::int32_t block_tokens = mooncake_block_tokens) {
    return read_mooncake(text, "t.jsonl", {.block_tokens = block_tokens});
}

// The message of the InputError that reading `text` throws (a doctest string, so `Contains` can match it).
doctest::String error_of(std::string_view text, std::int32_t block_tokens = mooncake_block_tokens) {
    try {
        (void)read(text, block_tokens);
    } catch (const InputError& e) {
        return e.what();
    }
    return "no error";
}

std::vector<TokenId> tokens(const Trace& t, const Request& r) {
    std::vector<TokenId> out(static_cast<std::size_t>(r.prompt_tokens));
    t.prompt_tokens(r, out);
    return out;
}

std::vector<TokenId> iota_tokens(TokenId first, std::size_t n) {
    std::vector<TokenId> out(n);
    std::iota(out.begin(), out.end(), first);
    return out;
}

// A valid line for the given fields.
std::string line(double ts, std::int64_t in, std::int64_t out, const std::vector<std::int64_t>& ids) {
    std::string s = message("{\"timestamp\": ", ts, ", \"input_length\": ", in, ", \"output_length\": ", out,
                            ", \"hash_ids\": [");
    for (std::size_t i = 0; i < ids.size(); ++i) s += message(i ? ", " : "", ids[i]);
    return s + "]}\n";
}

bool same_trace(const Trace& a, const Trace& b) {
    if (a.requests().size() != b.requests().size()) return false;
    for (std::size_t i = 0; i < a.requests().size(); ++i) {
        const Request& x = a.requests()[i];
        const Request& y = b.requests()[i];
        const auto bx = a.blocks(x), by = b.blocks(y);
        if (x.arrival_ms != y.arrival_ms || x.prompt_tokens != y.prompt_tokens || x.output_tokens != y.output_tokens ||
            !std::equal(bx.begin(), bx.end(), by.begin(), by.end()))
            return false;
    }
    return true;
}

// What every trace promises, whatever made it: the first broken promise, or "ok". (One check per trace, not per
// request: the carried trace has 3,993 requests and 121,877 blocks.)
std::string broken_invariant(const Trace& t) {
    double last = 0;
    for (const Request& r : t.requests()) {
        if (r.arrival_ms < last) return "arrivals decrease";
        last = r.arrival_ms;
        if (r.prompt_tokens < 1 || r.prompt_tokens > max_prompt_tokens) return "prompt length out of range";
        if (r.output_tokens < 1 || r.output_tokens > max_output_tokens) return "output length out of range";
        if (r.block_count != static_cast<std::uint32_t>((r.prompt_tokens + t.block_tokens() - 1) / t.block_tokens()))
            return "block count is not ceil(prompt / block)";
        for (const BlockId b : t.blocks(r))
            if (b >= t.distinct_blocks()) return "block id not below distinct_blocks()";
    }
    return "ok";
}

}  // namespace

TEST_CASE("the reader turns lines into requests, numbering hash ids densely and rebasing arrivals") {
    // Blocks of 4 tokens keep the token arithmetic visible. Extra fields and blank lines are ignored, CRLF is fine.
    const Trace t = read(line(10, 10, 3, {100, 101, 102}) + "\n" +
                             R"({"timestamp": 10, "input_length": 12, "output_length": 1, )"
                             R"("hash_ids": [100, 101, 102], "extra": "ignored"})"
                             "\r\n" +
                             line(20.5, 9, 7, {100, 101, 900}),
                         4);
    REQUIRE(t.requests().size() == 3);
    CHECK(t.block_tokens() == 4);
    CHECK(t.distinct_blocks() == 4);
    const Request &a = t.requests()[0], &b = t.requests()[1], &c = t.requests()[2];
    CHECK(a.arrival_ms == 0);
    CHECK(b.arrival_ms == 0);
    CHECK(c.arrival_ms == 10.5);
    CHECK(a.prompt_tokens == 10);
    CHECK(a.output_tokens == 3);
    CHECK(c.output_tokens == 7);
    CHECK(std::vector<BlockId>(t.blocks(c).begin(), t.blocks(c).end()) == std::vector<BlockId>{0, 1, 3});
    CHECK(t.block_length(a, 2) == 2);
    CHECK(t.block_length(b, 2) == 4);
    CHECK(t.block_length(c, 2) == 1);

    // Token o of block b is b * 4 + o: the partial block of `a` is the first half of the full one of `b`, and `c`
    // shares the first two blocks only.
    CHECK(tokens(t, a) == iota_tokens(0, 10));
    CHECK(tokens(t, b) == iota_tokens(0, 12));
    std::vector<TokenId> expected_c = iota_tokens(0, 8);
    expected_c.push_back(12);
    CHECK(tokens(t, c) == expected_c);
    std::vector<TokenId> too_short(5);
    CHECK_THROWS_AS(t.prompt_tokens(a, too_short), unikv::logic_error);
}

TEST_CASE("max_requests stops the reader before the lines after the limit") {
    const Trace t = read_mooncake(line(0, 5, 1, {0}) + line(1, 5, 1, {1}) + "{truncated", "t.jsonl",
                                  {.max_requests = 2});
    CHECK(t.requests().size() == 2);
}

TEST_CASE("a bad line is reported with its source, line number and field") {
    const std::string ok = line(0, 600, 2, {0, 1});
    SUBCASE("truncated JSON, also as the last line of a file cut short") {
        CHECK(error_of(ok + R"({"timestamp": 5, "input_length": 10, "output_length": 1, "hash_ids": [0)") ==
              doctest::Contains("t.jsonl:2: not valid JSON (truncated or malformed line): "));
        CHECK(error_of(ok + ok + R"({"timestamp": 5, "input_le)" + "\n") ==
              doctest::Contains("t.jsonl:3: not valid JSON"));
        CHECK(error_of(ok + ok.substr(0, ok.size() - 1) + " trailing\n") ==
              doctest::Contains("t.jsonl:2: not valid JSON"));
    }
    SUBCASE("a line that is not an object") {
        CHECK(error_of("[1, 2]\n") == "t.jsonl:1: expected a JSON object, found an array");
    }
    SUBCASE("missing fields") {
        CHECK(error_of(R"({"input_length": 5, "output_length": 1, "hash_ids": [0]})") ==
              "t.jsonl:1: missing field \"timestamp\"");
        CHECK(error_of(ok + R"({"timestamp": 1, "output_length": 1, "hash_ids": [0]})") ==
              "t.jsonl:2: missing field \"input_length\"");
        CHECK(error_of(R"({"timestamp": 1, "input_length": 5, "hash_ids": [0]})") ==
              "t.jsonl:1: missing field \"output_length\"");
        CHECK(error_of(R"({"timestamp": 1, "input_length": 5, "output_length": 1})") ==
              "t.jsonl:1: missing field \"hash_ids\"");
    }
    SUBCASE("wrong types") {
        CHECK(error_of(R"({"timestamp": "0", "input_length": 5, "output_length": 1, "hash_ids": [0]})") ==
              "t.jsonl:1: \"timestamp\" must be a number, found a string");
        CHECK(error_of(R"({"timestamp": 0, "input_length": "5", "output_length": 1, "hash_ids": [0]})") ==
              "t.jsonl:1: \"input_length\" must be an integer, found a string");
        CHECK(error_of(R"({"timestamp": 0, "input_length": 5.5, "output_length": 1, "hash_ids": [0]})") ==
              "t.jsonl:1: \"input_length\" must be an integer, found a fractional number");
        CHECK(error_of(R"({"timestamp": 0, "input_length": 5, "output_length": null, "hash_ids": [0]})") ==
              "t.jsonl:1: \"output_length\" must be an integer, found null");
        CHECK(error_of(R"({"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": 0})") ==
              "t.jsonl:1: \"hash_ids\" must be an array, found an integer");
        CHECK(error_of(R"({"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [0, "1"]})") ==
              "t.jsonl:1: \"hash_ids\"[1] must be an integer, found a string");
    }
    SUBCASE("negative and absurd values") {
        CHECK(error_of(line(-1, 5, 1, {0})) == "t.jsonl:1: \"timestamp\" is -1; it must be >= 0");
        CHECK(error_of(ok + line(0, -5, 1, {0})) == "t.jsonl:2: \"input_length\" is -5; it must be in [1, 16777216]");
        CHECK(error_of(line(0, 0, 1, {})) == "t.jsonl:1: \"input_length\" is 0; it must be in [1, 16777216]");
        CHECK(error_of(line(0, 5, -2, {0})) == "t.jsonl:1: \"output_length\" is -2; it must be in [1, 1048576]");
        CHECK(error_of(line(0, 5, 0, {0})) == "t.jsonl:1: \"output_length\" is 0; it must be in [1, 1048576]");
        CHECK(error_of(line(0, 5, 2'000'000, {0})) ==
              "t.jsonl:1: \"output_length\" is 2000000; it must be in [1, 1048576]");
        CHECK(error_of(R"({"timestamp": 0, "input_length": 18446744073709551615, "output_length": 1, )"
                       R"("hash_ids": []})") ==
              "t.jsonl:1: \"input_length\" is 18446744073709551615; it must be in [1, 16777216]");
        CHECK(error_of(line(0, 600, 1, {0, -4})) == "t.jsonl:1: \"hash_ids\"[1] is -4; hash ids must be >= 0");
        CHECK(error_of(line(5, 5, 1, {0}) + line(2e12, 5, 1, {0})) ==
              "t.jsonl:2: \"timestamp\" 2e+12 is more than 1e12 ms (31 years) after the first request's");
    }
    SUBCASE("hash_ids must number ceil(input_length / block) ids") {
        CHECK(error_of(line(0, 1025, 1, {0, 1})) ==
              "t.jsonl:1: \"hash_ids\" has 2 ids, but input_length 1025 needs ceil(1025 / 512) = 3");
        CHECK(error_of(line(0, 1024, 1, {0, 1, 2})) ==
              "t.jsonl:1: \"hash_ids\" has 3 ids, but input_length 1024 needs ceil(1024 / 512) = 2");
    }
    SUBCASE("a trace out of arrival order is rejected, naming both lines; ties are fine") {
        CHECK(error_of(line(40, 5, 1, {0}) + "\n" + line(40, 5, 1, {0}) + line(30, 5, 1, {0})) ==
              "t.jsonl:4: \"timestamp\" 30 is earlier than the previous request's 40 (line 3); a trace must be in "
              "arrival order (sort it by timestamp, ties in file order)");
    }
    SUBCASE("blank lines count for the line number") {
        CHECK(error_of(ok + "\n  \n" + line(1, -3, 1, {})) == doctest::Contains("t.jsonl:4: \"input_length\" is -3"));
    }
    SUBCASE("an empty file, and one with only blank lines") {
        CHECK(error_of("") == "t.jsonl: the trace is empty");
        CHECK(error_of("\n \n") == "t.jsonl: the trace has no requests (2 blank lines)");
    }
    SUBCASE("more distinct blocks than 31-bit token ids can number") {
        // Blocks of 2^30 tokens: token ids fit one block only.
        CHECK(error_of(line(0, 5, 1, {7}) + line(0, 5, 1, {7}) + line(0, 5, 1, {8}), 1 << 30) ==
              "t.jsonl:3: more distinct blocks than 31-bit token ids can number (at most 1 blocks of 1073741824 "
              "tokens)");
    }
    SUBCASE("a file that cannot be read") {
        CHECK_THROWS_WITH_AS((void)read_mooncake_file("/nonexistent/trace.jsonl"),
                             doctest::Contains("/nonexistent/trace.jsonl: cannot read the trace file"), InputError);
    }
}

TEST_CASE("the summary's reuse ceiling is token-exact, prefix-only and leaves the last prompt token to compute") {
    // Blocks of 4 tokens. Reusable tokens, by hand:
    //   a [1 2 3], 10 tokens: nothing cached                                  -> 0
    //   b [1 2 3], 12 tokens: blocks 1, 2 (8) + the 2 tokens of 3 that a held -> 10
    //   c [1 2 9],  9 tokens: blocks 1, 2; block 9 is new                     -> 8
    //   d [1 2],    8 tokens: all 8 held, but the last token is computed      -> 7
    //   e [7 8],    5 tokens: new                                             -> 0
    //   f [5 2],    8 tokens: block 2 was held only after block 1, not 5      -> 0
    const Trace t = read(line(10, 10, 3, {1, 2, 3}) + line(10, 12, 1, {1, 2, 3}) + line(20, 9, 2, {1, 2, 9}) +
                             line(25, 8, 4, {1, 2}) + line(25, 5, 9, {7, 8}) + line(30, 8, 1, {5, 2}),
                         4);
    const TraceSummary s = summarize(t);
    CHECK(s.requests == 6);
    CHECK(s.prompt_tokens == 10 + 12 + 9 + 8 + 5 + 8);
    CHECK(s.output_tokens == 3 + 1 + 2 + 4 + 9 + 1);
    CHECK(s.reusable_tokens == 10 + 8 + 7);
    CHECK(s.max_prefix_hit_rate() == doctest::Approx(25.0 / 52.0));
    CHECK(s.distinct_blocks == 7);
    CHECK(s.longest_prompt == 12);
    CHECK(s.longest_output == 9);
    CHECK(s.longest_request == 14);
    CHECK(s.duration_ms == 20);
}

TEST_CASE("a request's output continues into the earliest later prompt that extends it, and the ceiling counts it") {
    // The trace of the test above (blocks of 4 tokens): only b extends a (same blocks, 12 tokens against 10);
    // c and d share a's first blocks but are not longer with all of them, f holds block 2 after another block.
    const Trace t = read(line(10, 10, 3, {1, 2, 3}) + line(10, 12, 1, {1, 2, 3}) + line(20, 9, 2, {1, 2, 9}) +
                             line(25, 8, 4, {1, 2}) + line(25, 5, 9, {7, 8}) + line(30, 8, 1, {5, 2}),
                         4);
    const std::vector<std::int32_t> next = continuations(t);
    CHECK(next == std::vector<std::int32_t>{1, no_continuation, no_continuation, no_continuation, no_continuation,
                                            no_continuation});
    // a decodes 2 tokens (its third output is never fed back): b's prompt tokens 10 and 11, the rest of block 3.
    CHECK(prompt_token(t, t.requests()[1], 10) == t.token(2, 2));
    CHECK(prompt_token(t, t.requests()[1], 11) == t.token(2, 3));
    // With a's output cached, b reuses all of block 3 (11 of its 12 tokens: the last is computed), not 10.
    const TraceSummary s = summarize(t, next);
    CHECK(s.reusable_tokens == 11 + 8 + 7);
    CHECK(s.continued == 1);
    CHECK(s.outputs_continued);
    CHECK(summarize(t).reusable_tokens == 10 + 8 + 7);

    // A generated chat: every continuation is a later turn of the same conversation, holding the earlier prompt
    // and its whole reply, token for token.
    const Trace chat = generate({.workload = Workload::chat, .seed = 3, .requests = 300});
    const std::vector<std::int32_t> turns = continuations(chat);
    std::int64_t continued = 0;
    for (std::size_t i = 0; i < turns.size(); ++i) {
        if (turns[i] == no_continuation) continue;
        ++continued;
        const Request& r = chat.requests()[i];
        const Request& later = chat.requests()[static_cast<std::size_t>(turns[i])];
        REQUIRE(static_cast<std::size_t>(turns[i]) > i);
        CHECK(later.prompt_tokens >= r.prompt_tokens + r.output_tokens);
        std::vector<TokenId> a(static_cast<std::size_t>(r.prompt_tokens)), b(static_cast<std::size_t>(later.prompt_tokens));
        chat.prompt_tokens(r, a);
        chat.prompt_tokens(later, b);
        CHECK(std::equal(a.begin(), a.end(), b.begin()));
    }
    CHECK(continued > 100);
    CHECK(summarize(chat, turns).max_prefix_hit_rate() > summarize(chat).max_prefix_hit_rate() + 0.05);
}

TEST_CASE("the carried Mooncake trace parses with the figures its README states") {
    const Trace t = read_mooncake_file(UNIKV_SIM_DATA_DIR "/traces/mooncake_synthetic_trace.jsonl");
    CHECK(broken_invariant(t) == "ok");
    const TraceSummary s = summarize(t);
    CHECK(s.requests == 3993);
    CHECK(std::round(s.mean_prompt()) == 15325);  // "average input 15,325 tokens, output 149"
    CHECK(std::round(s.mean_output()) == 149);
    // The first line: timestamp 0, input 40160, output 6, hash ids 0..78.
    const Request& first = t.requests()[0];
    CHECK(first.arrival_ms == 0);
    CHECK(first.prompt_tokens == 40160);
    CHECK(first.output_tokens == 6);
    const auto blocks = t.blocks(first);
    CHECK(std::vector<BlockId>(blocks.begin(), blocks.end()) == [] {
        std::vector<BlockId> v(79);
        std::iota(v.begin(), v.end(), 0u);
        return v;
    }());
    CHECK(s.reusable_tokens > 0);
    CHECK(s.reusable_tokens < s.prompt_tokens);
}

TEST_CASE("generators are deterministic for a seed and differ across seeds") {
    for (const Workload w : all_workloads) {
        CAPTURE(workload_name(w));
        const GeneratorConfig config{.workload = w, .seed = 42, .requests = 100};
        const Trace a = generate(config);
        CHECK(broken_invariant(a) == "ok");
        CHECK(a.requests().size() == 100);
        CHECK(same_trace(a, generate(config)));
        GeneratorConfig other = config;
        other.seed = 43;
        CHECK_FALSE(same_trace(a, generate(other)));
    }
}

TEST_CASE("chat turns repeat the conversation so far, the partial last block included") {
    const Trace t = generate({.workload = Workload::chat, .seed = 7, .requests = 200});
    std::size_t extending = 0;  // requests whose prompt starts with every token of an earlier prompt
    const auto reqs = t.requests();
    for (std::size_t i = 0; i < reqs.size(); ++i) {
        const auto bi = t.blocks(reqs[i]);
        for (std::size_t j = 0; j < i; ++j) {
            const auto bj = t.blocks(reqs[j]);
            if (reqs[j].prompt_tokens < reqs[i].prompt_tokens && bj.size() <= bi.size() &&
                std::equal(bj.begin(), bj.end(), bi.begin())) {
                const std::vector<TokenId> ti = tokens(t, reqs[i]), tj = tokens(t, reqs[j]);
                CHECK(std::equal(tj.begin(), tj.end(), ti.begin()));
                ++extending;
                break;
            }
        }
    }
    // Conversations have 1-8 turns (4.5 on average), so most requests are later turns.
    CHECK(extending > reqs.size() / 2);
    CHECK(summarize(t).max_prefix_hit_rate() > 0.5);
}

TEST_CASE("agent and docqa requests share their system prompt or document") {
    for (const Workload w : {Workload::agent, Workload::docqa}) {
        CAPTURE(workload_name(w));
        const Trace t = generate({.workload = w, .seed = 5, .requests = 120});
        std::set<BlockId> first_blocks;
        for (const Request& r : t.requests()) first_blocks.insert(t.blocks(r)[0]);
        CHECK(first_blocks.size() <= (w == Workload::agent ? 3u : 50u));  // 3 agents; 50 documents
        CHECK(summarize(t).max_prefix_hit_rate() > 0.5);
    }
    CHECK_THROWS_WITH_AS((void)generate({.requests = 0}), "generator requests is 0; it must be at least 1", InputError);
}

TEST_CASE("sizes parse with binary and decimal units, and garbage or zero is refused naming the flag") {
    CHECK(parse_bytes("8GiB", "--device-memory") == 8ull << 30);
    CHECK(parse_bytes("512MiB", "-") == 512ull << 20);
    CHECK(parse_bytes("1.5TiB", "-") == 3ull << 39);
    CHECK(parse_bytes("0.5KiB", "-") == 512);
    CHECK(parse_bytes("40GB", "-") == 40'000'000'000ull);
    CHECK(parse_bytes("1.001kB", "-") == 1001);
    CHECK(parse_bytes("2 GiB", "-") == 2ull << 30);
    CHECK(parse_bytes("4096", "-") == 4096);
    CHECK(parse_bytes("4096B", "-") == 4096);
    CHECK(parse_bytes("15TiB", "-") == 15ull << 40);

    const auto error = [](std::string_view text) {
        try {
            (void)parse_bytes(text, "--host-memory");
        } catch (const InputError& e) {
            const std::string m = e.what();
            return m.substr(0, m.find(';'));
        }
        return std::string("no error");
    };
    CHECK(error("0") == "--host-memory: '0' is zero");
    CHECK(error("0GiB") == "--host-memory: '0GiB' is zero");
    CHECK(error("") == "--host-memory: '' is not a size");
    CHECK(error("GiB") == "--host-memory: 'GiB' is not a size");
    CHECK(error("-1GiB") == "--host-memory: '-1GiB' is not a size");
    CHECK(error("lots") == "--host-memory: 'lots' is not a size");
    CHECK(error("8GiBs") == "--host-memory: '8GiBs' has an unknown unit");
    CHECK(error("8gib") == "--host-memory: '8gib' has an unknown unit");
    CHECK(error("8  GiB") == "--host-memory: '8  GiB' has an unknown unit");
    CHECK(error("1.0001GiB") == "--host-memory: '1.0001GiB' has more than three decimals");
    CHECK(error("0.3B") == "--host-memory: '0.3B' is not a whole number of bytes");
    CHECK(error("16777216TiB") == "--host-memory: '16777216TiB' is too large");
    CHECK(error("18446744073709551616") == "--host-memory: '18446744073709551616' is too large");

    CHECK(format_bytes(8ull << 30) == "8 GiB");
    CHECK(format_bytes(3ull << 39) == "1.5 TiB");
    CHECK(format_bytes(1536) == "1.5 KiB");
    CHECK(format_bytes(4097) == "4097 B");
    CHECK(format_bytes(1000) == "1000 B");
}

TEST_CASE("names: workloads, write policies and model presets, the unknown preset listing the known ones") {
    for (const Workload w : all_workloads) CHECK(workload_from_name(workload_name(w)) == w);
    CHECK_FALSE(workload_from_name("Chat").has_value());
    for (const WritePolicyChoice p : all_write_policies) CHECK(write_policy_from_name(write_policy_name(p)) == p);
    CHECK_FALSE(write_policy_from_name("write-back").has_value());

    for (const std::string_view name : preset_names)
        CHECK(with_preset(name, "--model", []<class P>(std::type_identity<P>) { return P::name; }) == name);
    CHECK(with_preset("jamba-v0.1", "--model", []<class P>(std::type_identity<P>) {
              return P::model.mamba.layers;
          }) == 28);
    CHECK_THROWS_WITH_AS((void)with_preset("gemma3", "--model", [](auto) { return 0; }),
                         "--model: unknown model preset 'gemma3'; known presets: llama-3.1-8b, gemma-3-27b, "
                         "gpt-oss-120b, gpt-oss-20b, qwen3-next-80b-a3b, jamba-v0.1, synthetic-tri-hybrid",
                         InputError);
}
