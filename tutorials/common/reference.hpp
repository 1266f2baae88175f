// PyTorch's numbers for the tutorials that compare with them: the files in
// tests/fixtures/, written by tests/fixtures/make_fixtures.py (which holds the
// documents' PyTorch classes, copied out as the documents write them). The
// numbers are committed, so torch is never needed to run a tutorial.
//
//   tutorial::Reference ref("layer_norms");           // tests/fixtures/layer_norms.safetensors
//   nn::StateDict w = ref.params("seed004");           // "seed004.param.a_2" -> "a_2"
//   t.check_allclose(out, ref["seed004.output"], 1e-5, "the output matches PyTorch");
#pragma once

#include "core/tensor.hpp"
#include "nn/module.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

namespace tformer::tutorial {

/// tests/fixtures/<name>.safetensors of this source tree, or of
/// $TFORMER_FIXTURE_DIR when that is set.
std::filesystem::path fixture_path(std::string_view name);

/// One reference file. Throws IOError naming the path when it cannot be read.
class Reference {
public:
    explicit Reference(std::string_view name);

    /// The tensor called `key`; IndexError naming the file when there is none.
    const core::Tensor& operator[](const std::string& key) const;
    bool has(const std::string& key) const { return tensors_.count(key) != 0; }
    /// Every "<prefix>.param.<name>" as <name>: a module's state dict ("param.<name>"
    /// when the prefix is empty, as in the files of tests/nn/test_fixtures.cpp).
    nn::StateDict params(const std::string& prefix) const;
    /// Every "<prefix>.<name>" as <name> (for files that group tensors otherwise).
    nn::StateDict with_prefix(const std::string& prefix) const;
    /// The "__metadata__" entry `key` ("" when absent), e.g. "torch" (its version).
    std::string metadata(const std::string& key) const;
    const std::string& file() const { return file_; }

private:
    std::string file_;
    std::map<std::string, core::Tensor> tensors_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace tformer::tutorial
