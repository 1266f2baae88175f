// d2l's text pipeline for machine translation (seed 000 calls it through
// d2l.load_data_nmt): preprocess_nmt, tokenize_nmt, Vocab, build_array_nmt.
#include "tasks/text.hpp"

#include "core/error.hpp"
#include "core/parallel.hpp"
#include "core/utf8.hpp"

#include <algorithm>

namespace tformer::tasks {

// ==== preprocessing and tokenising ===================================================

// d2l (seed 000, via load_data_nmt):
//   text = text.replace('\u202f', ' ').replace('\xa0', ' ').lower()
//   out = [' ' + char if i > 0 and no_space(char, text[i - 1]) else char ...]
// where no_space(char, prev) is `char in set(',.!?') and prev != ' '`. The
// test looks at the previous character of the replaced, lowercased text, not
// at the output, so "a.." becomes "a . .". One pass does all three steps.
std::string preprocess_nmt(std::string_view text) {
    if (const size_t bad = core::find_invalid_utf8(text); bad != std::string_view::npos)
        fail<ValueError>("preprocess_nmt: invalid UTF-8 at byte {} (0x{:02X})", bad,
                         static_cast<unsigned>(static_cast<unsigned char>(text[bad])));
    const std::string lower = core::utf8_lower(text);  // str.lower(); the two spaces below are caseless
    std::string out;
    out.reserve(lower.size() + lower.size() / 8);
    bool prev_space = false;  // the previous character of the replaced, lowercased text is ' '
    for (size_t i = 0; i < lower.size();) {
        const std::string_view rest = std::string_view(lower).substr(i);
        if (rest.starts_with("\u202f") || rest.starts_with("\u00a0")) {  // NARROW NO-BREAK SPACE, NO-BREAK SPACE
            out += ' ';
            prev_space = true;
            i += rest[0] == '\xC2' ? 2 : 3;
            continue;
        }
        const char c = lower[i];
        const bool punct = c == ',' || c == '.' || c == '!' || c == '?';
        if (i > 0 && punct && !prev_space) out += ' ';  // i > 0: not before the very first character
        out += c;
        prev_space = c == ' ';
        ++i;  // the bytes of a multi-byte character go one by one; none is ' ' or punctuation
    }
    return out;
}

TokenLine tokenize(std::string_view line) {
    TokenLine tokens;
    size_t start = 0;
    while (true) {
        const size_t space = line.find(' ', start);
        if (space == std::string_view::npos) {
            tokens.emplace_back(line.substr(start));
            return tokens;
        }
        tokens.emplace_back(line.substr(start, space - start));
        start = space + 1;
    }
}

// d2l:
//   for i, line in enumerate(text.split('\n')):
//       if num_examples and i > num_examples: break
//       parts = line.split('\t')
//       if len(parts) == 2: source.append(parts[0].split(' ')); target.append(...)
NmtTokens tokenize_nmt(std::string_view text, int64_t num_examples) {
    if (num_examples < 0) fail<ValueError>("tokenize_nmt: num_examples must be >= 0, got {}", num_examples);
    NmtTokens result;
    size_t start = 0;
    for (int64_t i = 0; start <= text.size(); ++i) {
        if (num_examples > 0 && i > num_examples) break;  // d2l's off-by-one: lines 0..num_examples
        size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view line = text.substr(start, end - start);
        start = end + 1;  // past the end after the last line, like Python's split
        const size_t tab = line.find('\t');
        if (tab == std::string_view::npos || line.find('\t', tab + 1) != std::string_view::npos) continue;
        result.source.push_back(tokenize(line.substr(0, tab)));
        result.target.push_back(tokenize(line.substr(tab + 1)));
    }
    return result;
}

// ==== Vocab =====================================================================

Vocab::Vocab() { add("<unk>"); }

void Vocab::add(std::string token) {
    token_to_idx_.emplace(token, size());
    idx_to_token_.push_back(std::move(token));
}

// d2l.Vocab:
//   counter = collections.Counter(token for line in tokens for token in line)
//   self._token_freqs = sorted(counter.items(), key=lambda x: x[1], reverse=True)
//   self.idx_to_token = ['<unk>'] + reserved_tokens
//   for token, freq in self._token_freqs:
//       if freq < min_freq: break
//       if token not in self.token_to_idx: append it
// A Counter iterates in first-appearance order and Python's sort is stable
// (also with reverse=True), so equal counts keep first-appearance order;
// std::stable_sort on a first-appearance list does the same.
Vocab::Vocab(const TokenLines& lines, int64_t min_freq, const std::vector<std::string>& reserved) : Vocab() {
    for (const std::string& token : reserved) {
        if (contains(token)) fail<ValueError>("Vocab: reserved token '{}' appears twice (or is <unk>)", token);
        add(token);
    }
    // Count in first-appearance order. The views point into `lines`, which
    // outlives this constructor's counting.
    std::vector<std::pair<std::string_view, int64_t>> freqs;
    std::unordered_map<std::string_view, size_t> slot;
    for (const TokenLine& line : lines) {
        for (const std::string& token : line) {
            const auto [it, inserted] = slot.try_emplace(token, freqs.size());
            if (inserted) freqs.emplace_back(token, 0);
            ++freqs[it->second].second;
        }
    }
    std::stable_sort(freqs.begin(), freqs.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (const auto& [token, freq] : freqs) {
        if (freq < min_freq) break;
        if (!contains(token)) add(std::string(token));
    }
}

int64_t Vocab::to_index(std::string_view token) const {
    const auto it = token_to_idx_.find(token);
    return it == token_to_idx_.end() ? kUnk : it->second;
}

std::vector<int64_t> Vocab::to_indices(const TokenLine& line) const {
    std::vector<int64_t> ids;
    ids.reserve(line.size());
    for (const std::string& token : line) ids.push_back(to_index(token));
    return ids;
}

bool Vocab::contains(std::string_view token) const { return token_to_idx_.find(token) != token_to_idx_.end(); }

const std::string& Vocab::to_token(int64_t index) const {
    if (index < 0 || index >= size())
        fail<IndexError>("Vocab::to_token: index {} out of range for vocabulary of {}", index, size());
    return idx_to_token_[static_cast<size_t>(index)];
}

TokenLine Vocab::to_tokens(const std::vector<int64_t>& indices) const {
    TokenLine tokens;
    tokens.reserve(indices.size());
    for (int64_t index : indices) tokens.push_back(to_token(index));
    return tokens;
}

namespace {
constexpr std::string_view kVocabMagic = "tformer-vocab 1 ";
}  // namespace

Vocab Vocab::from_tokens(std::vector<std::string> tokens) {
    if (tokens.empty() || tokens[0] != "<unk>")
        fail<ValueError>("Vocab::from_tokens: the first token must be <unk>, got {}",
                         tokens.empty() ? std::string("no tokens") : "'" + tokens[0] + "'");
    Vocab vocab;
    vocab.idx_to_token_.clear();
    vocab.token_to_idx_.clear();
    for (std::string& token : tokens) {
        if (vocab.contains(token)) fail<ValueError>("Vocab::from_tokens: token '{}' appears twice", token);
        vocab.add(std::move(token));
    }
    return vocab;
}

Vocab Vocab::deserialize(std::string_view text) {
    // Header: "tformer-vocab 1 <size>\n".
    size_t header_end = text.find('\n');
    if (!text.starts_with(kVocabMagic) || header_end == std::string_view::npos)
        fail<IOError>("Vocab::deserialize: missing header '{}<size>'", kVocabMagic);
    const std::string_view count_text = text.substr(kVocabMagic.size(), header_end - kVocabMagic.size());
    int64_t count = 0;
    if (count_text.empty() || count_text.size() > 12 ||
        !std::all_of(count_text.begin(), count_text.end(), [](char c) { return c >= '0' && c <= '9'; }))
        fail<IOError>("Vocab::deserialize: bad token count '{}'", count_text);
    for (char c : count_text) count = count * 10 + (c - '0');

    Vocab vocab;
    vocab.idx_to_token_.clear();
    vocab.token_to_idx_.clear();
    size_t pos = header_end + 1;
    for (int64_t i = 0; i < count; ++i) {
        const size_t end = text.find('\n', pos);
        if (end == std::string_view::npos)
            fail<IOError>("Vocab::deserialize: header says {} tokens but the text ends after {}", count, i);
        std::string token;
        for (size_t k = pos; k < end; ++k) {
            if (text[k] != '\\') {
                token += text[k];
                continue;
            }
            const char e = k + 1 < end ? text[k + 1] : '\0';
            if (e == '\\')
                token += '\\';
            else if (e == 'n')
                token += '\n';
            else if (e == 't')
                token += '\t';
            else if (e == 'r')
                token += '\r';
            else
                fail<IOError>("Vocab::deserialize: bad escape in token {} (line {})", i, i + 2);
            ++k;
        }
        if (vocab.contains(token)) fail<IOError>("Vocab::deserialize: token '{}' appears twice", token);
        vocab.add(std::move(token));
        pos = end + 1;
    }
    if (pos != text.size())
        fail<IOError>("Vocab::deserialize: text continues after the {} tokens the header announces", count);
    if (vocab.size() == 0 || vocab.idx_to_token_[0] != "<unk>")
        fail<IOError>("Vocab::deserialize: the first token must be <unk>");
    return vocab;
}

// ==== arrays ======================================================================

// d2l: line[:num_steps] if len(line) > num_steps else line + [pad] * (num_steps - len(line))
std::vector<int64_t> truncate_pad(const std::vector<int64_t>& line, int64_t num_steps, int64_t padding) {
    if (num_steps < 1) fail<ValueError>("truncate_pad: num_steps must be >= 1, got {}", num_steps);
    std::vector<int64_t> out(static_cast<size_t>(num_steps), padding);
    std::copy_n(line.begin(), std::min<size_t>(line.size(), out.size()), out.begin());
    return out;
}

// d2l:
//   lines = [vocab[l] + [vocab['<eos>']] for l in lines]
//   array = torch.tensor([truncate_pad(l, num_steps, vocab['<pad>']) for l in lines])
//   valid_len = (array != vocab['<pad>']).type(torch.int32).sum(1)
NmtArray build_array_nmt(const TokenLines& lines, const Vocab& vocab, int64_t num_steps) {
    if (num_steps < 1) fail<ValueError>("build_array_nmt: num_steps must be >= 1, got {}", num_steps);
    if (!vocab.contains("<pad>") || !vocab.contains("<eos>"))
        fail<ValueError>("build_array_nmt: the vocabulary ({} tokens) has no <pad> or no <eos>", vocab.size());
    const int64_t pad = vocab.to_index("<pad>"), eos = vocab.to_index("<eos>");
    const auto n = static_cast<int64_t>(lines.size());
    NmtArray result{.tokens = core::Tensor::empty({n, num_steps}, core::DType::int64),
                    .valid_lens = core::Tensor::empty({n}, core::DType::int64)};
    int64_t* tokens = result.tokens.data<int64_t>();          // (N, T)
    int64_t* valid_lens = result.valid_lens.data<int64_t>();  // (N)
    // Rows are independent and the vocabulary is only read: split them over threads.
    core::parallel_for(0, n, num_steps * 8, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
            const TokenLine& line = lines[static_cast<size_t>(i)];
            const auto len = static_cast<int64_t>(line.size());
            int64_t* row = tokens + i * num_steps;
            // ids of the line, then <eos>, then <pad> up to num_steps
            for (int64_t t = 0; t < num_steps; ++t)
                row[t] = t < len ? vocab.to_index(line[static_cast<size_t>(t)]) : t == len ? eos : pad;
            valid_lens[i] = std::count_if(row, row + num_steps, [pad](int64_t id) { return id != pad; });
        }
    });
    return result;
}

}  // namespace tformer::tasks
