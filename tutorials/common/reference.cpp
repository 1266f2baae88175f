#include "common/reference.hpp"

#include "core/error.hpp"
#include "nn/safetensors.hpp"

#include <cstdlib>

namespace tformer::tutorial {

std::filesystem::path fixture_path(std::string_view name) {
    const char* dir = std::getenv("TFORMER_FIXTURE_DIR");
    const std::filesystem::path base = dir != nullptr && *dir != '\0'
                                           ? std::filesystem::path(dir)
                                           : std::filesystem::path(TFORMER_SOURCE_DIR) / "tests" / "fixtures";
    return base / (std::string(name) + ".safetensors");
}

Reference::Reference(std::string_view name) : file_(fixture_path(name).string()) {
    nn::SafeTensors st = nn::load_safetensors(file_);
    tensors_ = std::move(st.tensors);
    metadata_ = std::move(st.metadata);
}

const core::Tensor& Reference::operator[](const std::string& key) const {
    auto it = tensors_.find(key);
    if (it == tensors_.end()) fail<IndexError>("reference {}: no tensor '{}'", file_, key);
    return it->second;
}

nn::StateDict Reference::params(const std::string& prefix) const {
    const std::string head = prefix.empty() ? std::string("param.") : prefix + ".param.";
    nn::StateDict state;
    for (const auto& [key, value] : tensors_)
        if (key.rfind(head, 0) == 0) state[key.substr(head.size())] = value;
    return state;
}

nn::StateDict Reference::with_prefix(const std::string& prefix) const {
    const std::string head = prefix + ".";
    nn::StateDict out;
    for (const auto& [key, value] : tensors_)
        if (key.rfind(head, 0) == 0) out[key.substr(head.size())] = value;
    return out;
}

std::string Reference::metadata(const std::string& key) const {
    auto it = metadata_.find(key);
    return it == metadata_.end() ? std::string() : it->second;
}

}  // namespace tformer::tutorial
