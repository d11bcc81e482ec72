#pragma once
/// \file
/// The Mooncake trace reader. A trace is JSON Lines: one object per line with
///
/// | field | meaning | accepted |
/// |---|---|---|
/// | `timestamp` | arrival in ms | a number >= 0, non-decreasing along the file |
/// | `input_length` | prompt tokens | an integer in [1, `max_prompt_tokens`] |
/// | `output_length` | tokens to decode | an integer in [1, `max_output_tokens`] |
/// | `hash_ids` | one id per block of the prompt | exactly `ceil(input_length / block_tokens)` integers >= 0 |
///
/// Every line of the published trace satisfies these rules (its `hash_ids` count is exactly
/// `ceil(input_length / 512)`). Other fields are ignored, and so are blank lines. A trace out of arrival order is
/// rejected, not sorted: the file is the workload, and a silent reorder would change which turn of a
/// conversation finds the other's prefix cached. Arrivals are counted from the first request's timestamp.
///
/// A bad line throws `InputError` naming the source, the line (1-based) and the field, for example
/// `trace.jsonl:17: "input_length" is -5; it must be in [1, 16777216]`. Parsing uses simdjson's DOM parser,
/// which validates each line completely, so a truncated or malformed line is always reported.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <simdjson.h>


#include <unikv_sim/input_error.hpp>
#include <unikv_sim/trace.hpp>

namespace unikv::sim {

/// Tokens per hash id in the Mooncake traces.
inline constexpr std::int32_t mooncake_block_tokens = 512;

/// How to read a trace.
struct ReadOptions {
    /// Tokens per hash id.
    std::int32_t block_tokens = mooncake_block_tokens;
    /// Stop after this many requests; the rest of the text is not read.
    std::size_t max_requests = std::numeric_limits<std::size_t>::max();
};

namespace detail {

[[nodiscard]] inline std::string_view json_type_name(simdjson::dom::element_type t) noexcept {
    using T = simdjson::dom::element_type;
    switch (t) {
        case T::ARRAY: return "an array";
        case T::OBJECT: return "an object";
        case T::INT64:
        case T::UINT64: return "an integer";
        case T::DOUBLE: return "a fractional number";
        case T::STRING: return "a string";
        case T::BOOL: return "a boolean";
        case T::NULL_VALUE: return "null";
    }
    return "an unknown JSON value";
}

/// Reads one line's fields into a `TraceBuilder`, throwing `InputError` prefixed with `source:line: `.
class MooncakeLineReader {
public:
    MooncakeLineReader(std::string_view source, const ReadOptions& options)
        : source_(source), options_(options), builder_(options.block_tokens) {}

    /// Parses the `len` bytes at `line` (followed by at least `SIMDJSON_PADDING` readable bytes).
    void read(const char* line, std::size_t len, std::size_t line_number) {
        line_ = line_number;
        simdjson::dom::element doc;
        if (const auto err = parser_.parse(line, len, false).get(doc))
            fail("not valid JSON (truncated or malformed line): ", simdjson::error_message(err));
        simdjson::dom::object obj;
        if (doc.get(obj)) fail("expected a JSON object, found ", json_type_name(doc.type()));

        const double timestamp = number_field(obj, "timestamp");
        if (builder_.size() == 0) {
            first_timestamp_ = timestamp;
        } else if (timestamp < last_timestamp_) {
            fail("\"timestamp\" ", timestamp, " is earlier than the previous request's ", last_timestamp_,
                 " (line ", last_line_,
                 "); a trace must be in arrival order (sort it by timestamp, ties in file order)");
        }
        const double arrival = timestamp - first_timestamp_;
        if (arrival > max_arrival_ms)
            fail("\"timestamp\" ", timestamp, " is more than 1e12 ms (31 years) after the first request's");
        const std::int64_t input = integer_field(obj, "input_length", 1, max_prompt_tokens);
        const std::int64_t output = integer_field(obj, "output_length", 1, max_output_tokens);

        simdjson::dom::array ids;
        const simdjson::dom::element ids_element = field(obj, "hash_ids");
        if (ids_element.get(ids)) fail("\"hash_ids\" must be an array, found ", json_type_name(ids_element.type()));
        const std::int64_t bt = options_.block_tokens;
        const std::int64_t needed = (input + bt - 1) / bt;
        if (static_cast<std::int64_t>(ids.size()) != needed)
            fail("\"hash_ids\" has ", ids.size(), " ids, but input_length ", input, " needs ceil(", input, " / ", bt,
                 ") = ", needed);
        hashes_.clear();
        std::size_t i = 0;
        for (const simdjson::dom::element id : ids) {
            std::uint64_t h = 0;
            if (id.get(h)) {
                std::int64_t negative = 0;
                if (!id.get(negative)) fail("\"hash_ids\"[", i, "] is ", negative, "; hash ids must be >= 0");
                fail("\"hash_ids\"[", i, "] must be an integer, found ", json_type_name(id.type()));
            }
            hashes_.push_back(h);
            ++i;
        }
        try {
            builder_.add(arrival, input, output, hashes_);
        } catch (const InputError& e) {
            fail(e.what());
        }
        last_timestamp_ = timestamp;
        last_line_ = line_;
    }

    /// Requests read so far.
    [[nodiscard]] std::size_t size() const noexcept { return builder_.size(); }
    /// The trace read so far; the reader is left moved-from.
    [[nodiscard]] Trace finish() && { return std::move(builder_).finish(); }

private:
    template <class... Parts>
    [[noreturn]] void fail(const Parts&... parts) const {
        throw InputError(message(source_, ":", line_, ": ", parts...));
    }

    [[nodiscard]] simdjson::dom::element field(const simdjson::dom::object& obj, std::string_view key) const {
        simdjson::dom::element e;
        if (obj.at_key(key).get(e)) fail("missing field \"", key, "\"");
        return e;
    }

    [[nodiscard]] double number_field(const simdjson::dom::object& obj, std::string_view key) const {
        const simdjson::dom::element e = field(obj, key);
        double v = 0;
        if (e.get(v)) fail("\"", key, "\" must be a number, found ", json_type_name(e.type()));
        if (!(v >= 0) || !std::isfinite(v)) fail("\"", key, "\" is ", v, "; it must be >= 0");
        return v;
    }

    [[nodiscard]] std::int64_t integer_field(const simdjson::dom::object& obj, std::string_view key,
                                             std::int64_t lo, std::int64_t hi) const {
        const simdjson::dom::element e = field(obj, key);
        std::int64_t v = 0;
        if (e.type() == simdjson::dom::element_type::UINT64) {
            fail("\"", key, "\" is ", e.get_uint64().value_unsafe(), "; it must be in [", lo, ", ", hi, "]");
        }
        if (e.get(v)) fail("\"", key, "\" must be an integer, found ", json_type_name(e.type()));
        if (v < lo || v > hi) fail("\"", key, "\" is ", v, "; it must be in [", lo, ", ", hi, "]");
        return v;
    }

    std::string_view source_;
    ReadOptions options_;
    TraceBuilder builder_;
    simdjson::dom::parser parser_;
    std::vector<std::uint64_t> hashes_;  ///< the current line's ids, reused across lines
    std::size_t line_ = 0;
    std::size_t last_line_ = 0;
    double first_timestamp_ = 0;
    double last_timestamp_ = 0;
};

/// Reads every line of `text`, which is followed by at least `SIMDJSON_PADDING` readable bytes.
[[nodiscard]] inline Trace read_mooncake_padded(const char* text, std::size_t size, std::string_view source,
                                                const ReadOptions& options) {
    if (size == 0) throw InputError(message(source, ": the trace is empty"));
    MooncakeLineReader reader(source, options);
    std::size_t line = 0;
    for (std::size_t at = 0; at < size && reader.size() < options.max_requests;) {
        ++line;
        const void* nl = std::memchr(text + at, '\n', size - at);
        const std::size_t end = nl ? static_cast<std::size_t>(static_cast<const char*>(nl) - text) : size;
        std::size_t first = at;
        while (first < end && (text[first] == ' ' || text[first] == '\t' || text[first] == '\r')) ++first;
        if (first < end) reader.read(text + at, end - at, line);
        at = end + 1;
    }
    if (reader.size() == 0)
        throw InputError(message(source, ": the trace has no requests (", line, " blank lines)"));
    return std::move(reader).finish();
}

}  // namespace detail

/// Reads a Mooncake trace from `text`; `source` names it in error messages (a file name, `<inline>`). Throws
/// `InputError` on the first bad line, on an empty text and on one without requests. O(size of text).
[[nodiscard]] inline Trace read_mooncake(std::string_view text, std::string_view source,
                                         const ReadOptions& options = {}) {
    const simdjson::padded_string padded(text);
    return detail::read_mooncake_padded(padded.data(), padded.size(), source, options);
}

/// Reads the Mooncake trace file at `path` (see `read_mooncake`); a file that cannot be read throws
/// `InputError` too.
[[nodiscard]] inline Trace read_mooncake_file(const std::string& path, const ReadOptions& options = {}) {
    simdjson::padded_string text;
    if (const auto err = simdjson::padded_string::load(path).get(text))
        throw InputError(message(path, ": cannot read the trace file (", simdjson::error_message(err), ")"));
    return detail::read_mooncake_padded(text.data(), text.size(), path, options);
}

}  // namespace unikv::sim
