// Containers: Sequential (ModuleList is a template in layers.hpp).
#include "nn/layers.hpp"

#include <string>

namespace tformer::nn {

void Sequential::push_back(std::shared_ptr<UnaryModule> module) {
    push_back(std::to_string(modules_.size()), std::move(module));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<UnaryModule> module) {
    modules_.push_back(register_module(name, std::move(module)));
}

// y = f_k(... f_1(f_0(x)))
Variable Sequential::forward(const Variable& x) {
    Variable y = x;
    for (const auto& m : modules_) y = m->forward(y);
    return y;
}

UnaryModule& Sequential::operator[](size_t i) {
    if (i >= modules_.size()) fail<IndexError>("Sequential: index {} out of range for {} modules", i, modules_.size());
    return *modules_[i];
}

}  // namespace tformer::nn
