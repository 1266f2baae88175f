// The basic layers (nn/layers.hpp), parameter init (nn/init.hpp) and the
// Module machinery they exercise: registration names, state dicts,
// train()/eval(). Values are checked against hand computations and against
// the worked examples of the teaching documents (seeds 000, 002, 004).
#include "nn/init.hpp"
#include "nn/layers.hpp"

#include "autograd/autograd.hpp"
#include "core/core.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

using namespace tformer;
using namespace tformer::nn;
using autograd::Variable;
using Catch::Contains;
using core::DType;
using core::Tensor;

namespace {

Tensor t32(const std::vector<double>& values, const core::Shape& shape) { return core::tensor(values, shape); }
Tensor t64(const std::vector<double>& values, const core::Shape& shape) {
    return core::tensor(values, shape, DType::float64);
}
Tensor ids(const std::vector<int64_t>& values, const core::Shape& shape) { return core::from_vector(values, shape); }

// every element of `actual` within `margin` of `expected` (row-major)
void require_values(const Tensor& actual, const std::vector<double>& expected, double margin) {
    const std::vector<double> a = actual.to_vector();
    REQUIRE(a.size() == expected.size());
    for (size_t i = 0; i < a.size(); ++i) {
        INFO("element " << i);
        CHECK(a[i] == Approx(expected[i]).margin(margin));
    }
}

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Variable>>& named) {
    std::vector<std::string> out;
    for (const auto& [name, _] : named) out.push_back(name);
    return out;
}

// Linear(3, 4) -> ReLU -> Linear(4, 2, no bias): the "small nested module"
std::shared_ptr<Sequential> small_mlp(core::Generator& gen) {
    auto seq = std::make_shared<Sequential>();
    seq->push_back(std::make_shared<Linear>(Linear::Options{.in_features = 3, .out_features = 4}, gen));
    seq->push_back(std::make_shared<ReLU>());
    seq->push_back(std::make_shared<Linear>(Linear::Options{.in_features = 4, .out_features = 2, .bias = false}, gen));
    return seq;
}

// A module with parameters at two depths, a buffer-carrying child and a dropout.
class Block : public Module {
public:
    explicit Block(core::Generator& gen) : Module("Block") {
        ffn = register_module("ffn", small_mlp(gen));
        norm = register_module("norm", std::make_shared<BatchNorm1d>(BatchNorm1d::Options{.num_features = 2}));
        dropout = register_module("dropout", std::make_shared<Dropout>(Dropout::Options{.p = 0.1}, gen));
        scale = register_parameter("scale", core::ones({1}));
    }
    std::shared_ptr<Sequential> ffn;
    std::shared_ptr<BatchNorm1d> norm;
    std::shared_ptr<Dropout> dropout;
    Variable scale;
};

}  // namespace

// ============================ Module machinery ============================

TEST_CASE("Module::named_parameters(): Sequential children are named by position, nested names join with dots",
          "[nn][layers]") {
    core::Generator gen(1);
    auto mlp = small_mlp(gen);
    CHECK(names_of(mlp->named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight"});
    CHECK(mlp->num_parameters() == 4 * 3 + 4 + 2 * 4);

    Block block(gen);
    CHECK(names_of(block.named_parameters()) ==
          std::vector<std::string>{"scale", "ffn.0.weight", "ffn.0.bias", "ffn.2.weight", "norm.weight", "norm.bias"});
    std::vector<std::string> buffers;
    for (const auto& [name, _] : block.named_buffers()) buffers.push_back(name);
    CHECK(buffers == std::vector<std::string>{"norm.running_mean", "norm.running_var", "norm.num_batches_tracked"});

    // a named push_back, as d2l's blks.add_module("block0", ...)
    Sequential named;
    named.push_back("block0", std::make_shared<LayerNorm>(LayerNorm::Options{.normalized_shape = 2}));
    named.push_back("block1", std::make_shared<LayerNorm>(LayerNorm::Options{.normalized_shape = 2}));
    CHECK(names_of(named.named_parameters()) ==
          std::vector<std::string>{"block0.weight", "block0.bias", "block1.weight", "block1.bias"});
    REQUIRE_THROWS_WITH(named.push_back("block0", std::make_shared<ReLU>()),
                        Contains("the name 'block0' is already registered"));
    REQUIRE_THROWS_AS(named[2], IndexError);
    REQUIRE_THROWS_WITH(named[2], "Sequential: index 2 out of range for 2 modules");
}

TEST_CASE("ModuleList: children named by position or by name, indexable, checked", "[nn][layers]") {
    ModuleList<LayerNorm> norms;
    norms.push_back(std::make_shared<LayerNorm>(LayerNorm::Options{.normalized_shape = 3}));
    norms.push_back("block1", std::make_shared<LayerNorm>(LayerNorm::Options{.normalized_shape = 4}));
    CHECK(names_of(norms.named_parameters()) ==
          std::vector<std::string>{"0.weight", "0.bias", "block1.weight", "block1.bias"});
    CHECK(norms.size() == 2);
    CHECK(norms[1].options.normalized_shape == 4);
    REQUIRE_THROWS_WITH(norms[2], "ModuleList: index 2 out of range for 2 modules");
}

TEST_CASE("Module::state_dict() / load_state_dict(): round trip in place, parameters and buffers", "[nn][layers]") {
    core::Generator gen_a(1), gen_b(2);
    Block a(gen_a), b(gen_b);
    // give a's BatchNorm running statistics something to carry
    a.norm->forward(Variable(t32({1, 2, 2, 3, 4, 7}, {3, 2})));

    const StateDict state = a.state_dict();
    CHECK(state.size() == 9);
    CHECK(state.at("norm.num_batches_tracked").dtype() == DType::int64);
    CHECK(state.at("norm.num_batches_tracked").item() == 1);
    // a state dict holds copies: changing the module afterwards leaves it alone
    core::fill_(a.scale.value(), 5.0);
    CHECK(state.at("scale").item() == 1.0);

    const void* storage_before = b.ffn->named_parameters()[0].second.value().raw_data();
    CHECK(b.state_dict().at("ffn.0.weight").to_vector() != state.at("ffn.0.weight").to_vector());
    b.load_state_dict(state);
    for (const auto& [name, value] : b.state_dict()) {
        INFO(name);
        CHECK(value.to_vector() == state.at(name).to_vector());
    }
    // loaded in place: the parameter keeps its storage (optimizers holding it keep working)
    CHECK(b.ffn->named_parameters()[0].second.value().raw_data() == storage_before);
    CHECK(b.norm->buffer("num_batches_tracked").item() == 1);
}

TEST_CASE("Module::load_state_dict(): strict errors list every missing, unexpected and wrongly shaped name",
          "[nn][layers]") {
    core::Generator gen(3);
    auto mlp = small_mlp(gen);
    const StateDict original = mlp->state_dict();

    StateDict bad = original;
    bad.erase("0.bias");
    bad["extra.weight"] = core::zeros({2});
    bad["2.weight"] = core::zeros({3, 4});
    try {
        mlp->load_state_dict(bad);
        FAIL("load_state_dict accepted a bad state dict");
    } catch (const ValueError& e) {
        const std::string message = e.what();
        CHECK_THAT(message, Contains("load_state_dict: the state dict does not fit this Sequential"));
        CHECK_THAT(message, Contains("missing: 0.bias"));
        CHECK_THAT(message, Contains("unexpected: extra.weight"));
        CHECK_THAT(message, Contains("wrong shape: 2.weight (expected (2x4), got (3x4))"));
    }
    // nothing changed
    for (const auto& [name, value] : mlp->state_dict()) CHECK(value.to_vector() == original.at(name).to_vector());

    // non-strict: missing and unexpected names are allowed, a wrong shape never is
    StateDict partial;
    partial["0.bias"] = core::full({4}, 0.5);
    partial["unused"] = core::zeros({1});
    mlp->load_state_dict(partial, /*strict=*/false);
    CHECK(mlp->state_dict().at("0.bias").to_vector() == std::vector<double>{0.5, 0.5, 0.5, 0.5});
    CHECK(mlp->state_dict().at("0.weight").to_vector() == original.at("0.weight").to_vector());
    partial["2.weight"] = core::zeros({4, 2});
    REQUIRE_THROWS_WITH(mlp->load_state_dict(partial, false), Contains("wrong shape: 2.weight"));
}

TEST_CASE("Module::train() / eval(): recurse into every descendant", "[nn][layers]") {
    core::Generator gen(4);
    Block block(gen);
    auto all_training = [&](bool expected) {
        CHECK(block.is_training() == expected);
        CHECK(block.ffn->is_training() == expected);
        CHECK(block.ffn->operator[](0).is_training() == expected);
        CHECK(block.norm->is_training() == expected);
        CHECK(block.dropout->is_training() == expected);
    };
    all_training(true);  // modules start in training mode, as in PyTorch
    block.eval();
    all_training(false);
    block.train();
    all_training(true);
    block.train(false);
    all_training(false);

    // PositionalEncoding's dropout is a registered child, so eval() reaches it
    PositionalEncoding pe({.num_hiddens = 4, .dropout = 0.5, .max_len = 8}, gen);
    pe.eval();
    const Variable X(core::ones({1, 3, 4}));
    const Tensor expected = core::add(X.value(), pe.P.slice(1, 0, 3));
    CHECK(pe(X).value().to_vector() == expected.to_vector());
}

TEST_CASE("Module::to(float64): parameters and floating buffers change dtype, the counter stays int64",
          "[nn][layers]") {
    BatchNorm1d bn({.num_features = 2});
    bn.to(DType::float64);
    CHECK(bn.weight.dtype() == DType::float64);
    CHECK(bn.buffer("running_mean").dtype() == DType::float64);
    CHECK(bn.buffer("num_batches_tracked").dtype() == DType::int64);
    const Variable y = bn(Variable(t64({1, 2, 2, 3}, {2, 2})));
    CHECK(y.dtype() == DType::float64);
    CHECK(bn.buffer("running_mean").dtype() == DType::float64);
}

// ============================ Linear ============================

TEST_CASE("Linear::forward(x): y = x Wᵀ + b against a hand computation, 2-D and 3-D", "[nn][layers]") {
    Linear dense({.in_features = 3, .out_features = 2});
    core::copy_(dense.weight.value(), t32({1, 2, 3, 4, 5, 6}, {2, 3}));
    core::copy_(dense.bias.value(), t32({0.5, -1}, {2}));
    // row [1, 0, -1]: [1 - 3, 4 - 6] + b = [-1.5, -3];  row [2, 1, 0]: [2 + 2, 8 + 5] + b = [4.5, 12]
    const Variable y = dense(Variable(t32({1, 0, -1, 2, 1, 0}, {2, 3})));
    CHECK(y.shape() == core::Shape{2, 2});
    CHECK(y.value().to_vector() == std::vector<double>{-1.5, -3, 4.5, 12});

    // (B, T, in) -> (B, T, out): the leading dims are kept
    const Variable y3 = dense(Variable(t32({1, 0, -1, 2, 1, 0, 0, 0, 0, 1, 1, 1}, {2, 2, 3})));
    CHECK(y3.shape() == core::Shape{2, 2, 2});
    CHECK(y3.value().to_vector() == std::vector<double>{-1.5, -3, 4.5, 12, 0.5, -1, 6.5, 14});

    Linear no_bias({.in_features = 3, .out_features = 2, .bias = false});
    CHECK_FALSE(no_bias.bias.defined());
    CHECK(names_of(no_bias.named_parameters()) == std::vector<std::string>{"weight"});
    core::copy_(no_bias.weight.value(), t32({1, 2, 3, 4, 5, 6}, {2, 3}));
    CHECK(no_bias(Variable(t32({1, 0, -1}, {1, 3}))).value().to_vector() == std::vector<double>{-2, -2});
}

TEST_CASE("Linear::forward(x): a wrong feature count names the layer and the shapes", "[nn][layers]") {
    Linear dense({.in_features = 4, .out_features = 3});
    REQUIRE_THROWS_AS(dense(Variable(core::zeros({2, 5}))), ShapeError);
    REQUIRE_THROWS_WITH(dense(Variable(core::zeros({2, 5}))),
                        "Linear: input of shape (2x5) must be (..., in_features=4)");
    REQUIRE_THROWS_WITH(dense(Variable(core::scalar(1.0))), "Linear: input of shape () must be (..., in_features=4)");
    REQUIRE_THROWS_WITH(Linear({.in_features = -1, .out_features = 2}), Contains("must be non-negative"));
}

TEST_CASE("Linear(options, gen): PyTorch's init W, b ~ U(-1/√in, 1/√in), reproducible from the seed", "[nn][layers]") {
    core::Generator gen(5);
    Linear dense({.in_features = 16, .out_features = 64}, gen);  // bound 1/√16 = 0.25
    for (const Variable& p : {dense.weight, dense.bias}) {
        double largest = 0;
        for (double v : p.value().to_vector()) largest = std::max(largest, std::abs(v));
        CHECK(largest <= 0.25);
        CHECK(largest > 0.2);  // the range is actually used
    }
    core::Generator again(5);
    const int64_t before = core::storage_bytes();
    core::reset_storage_peak();
    Linear twin({.in_features = 16, .out_features = 64}, again);
    CHECK(twin.weight.value().to_vector() == dense.weight.value().to_vector());
    CHECK(twin.bias.value().to_vector() == dense.bias.value().to_vector());
    // initialised in place: building the layer allocates its parameters and nothing else
    CHECK(core::storage_peak_bytes() - before == (64 * 16 + 64) * 4);
}

// ============================ Embedding ============================

TEST_CASE("Embedding::forward(ids): rows of the weight, the padding row starts at zero and gets no gradient",
          "[nn][layers]") {
    core::Generator gen(6);
    Embedding emb({.num_embeddings = 5, .embedding_dim = 3, .padding_idx = 1}, gen);
    CHECK(emb.weight.value().select(0, 1).to_vector() == std::vector<double>{0, 0, 0});
    CHECK(emb.weight.value().select(0, 0).to_vector() != std::vector<double>{0, 0, 0});

    const Tensor tokens = ids({1, 2, 1, 0, 2, 4}, {2, 3});
    const Variable y = emb(tokens);  // (2, 3, 3)
    CHECK(y.shape() == core::Shape{2, 3, 3});
    CHECK(y.value().select(0, 1).select(0, 2).to_vector() == emb.weight.value().select(0, 4).to_vector());
    CHECK(y.value().select(0, 0).select(0, 0).to_vector() == std::vector<double>{0, 0, 0});

    // d Σy / d weight[v] = number of times v occurs, except the padding row
    autograd::sum(y).backward();
    require_values(emb.weight.grad(), {1, 1, 1, 0, 0, 0, 2, 2, 2, 0, 0, 0, 1, 1, 1}, 0);
}

TEST_CASE("Embedding(options, gen): N(0, 1) init", "[nn][layers]") {
    core::Generator gen(7);
    Embedding emb({.num_embeddings = 200, .embedding_dim = 100}, gen);
    const std::vector<double> w = emb.weight.value().to_vector();
    double mean = 0, sq = 0;
    for (double v : w) mean += v;
    mean /= w.size();
    for (double v : w) sq += (v - mean) * (v - mean);
    CHECK(std::abs(mean) < 0.02);  // σ/√n = 0.007
    CHECK(std::sqrt(sq / w.size()) == Approx(1.0).margin(0.02));
}

TEST_CASE("Embedding::forward(ids): bad ids and options name the layer and the numbers", "[nn][layers]") {
    Embedding emb({.num_embeddings = 40, .embedding_dim = 4});
    REQUIRE_THROWS_AS(emb(ids({3, 57}, {2})), IndexError);
    REQUIRE_THROWS_WITH(emb(ids({3, 57}, {2})), "Embedding: token id 57 out of range for vocabulary of 40");
    REQUIRE_THROWS_WITH(emb(ids({-1}, {1})), "Embedding: token id -1 out of range for vocabulary of 40");
    REQUIRE_THROWS_WITH(emb(core::zeros({2})), "Embedding: token ids must be int64, got float32 (shape (2))");
    REQUIRE_THROWS_WITH(Embedding({.num_embeddings = 40, .embedding_dim = 4, .padding_idx = 40}),
                        "Embedding: padding_idx 40 out of range for vocabulary of 40 (use -1 for none)");
}

// ============================ Dropout, ReLU ============================

TEST_CASE("Dropout::forward(x): identity in eval mode", "[nn][layers]") {
    Dropout drop({.p = 0.5});
    drop.eval();
    const Variable x(core::randn({4, 5}));
    CHECK(drop(x).value().to_vector() == x.value().to_vector());
}

TEST_CASE("Dropout::forward(x): training zeroes about p of the elements and scales survivors by 1/(1-p)",
          "[nn][layers]") {
    const double p = 0.3;
    core::Generator gen(8);
    Dropout drop({.p = p}, gen);
    const int64_t n = 100000;
    const std::vector<double> y = drop(Variable(core::full({n}, 2.0))).value().to_vector();
    int64_t zeros = 0;
    for (double v : y) {
        if (v == 0) {
            ++zeros;
        } else {
            REQUIRE(v == Approx(2.0 / (1 - p)));
        }
    }
    CHECK(static_cast<double>(zeros) / n == Approx(p).margin(0.01));  // σ of the fraction: 0.0014
}

TEST_CASE("Dropout(options, gen): the same seed gives the same mask", "[nn][layers]") {
    core::Generator g1(9), g2(9), g3(10);
    Dropout d1({.p = 0.5}, g1), d2({.p = 0.5}, g2), d3({.p = 0.5}, g3);
    const Variable x(core::ones({64}));
    const std::vector<double> a = d1(x).value().to_vector();
    CHECK(d2(x).value().to_vector() == a);
    CHECK(d3(x).value().to_vector() != a);
    CHECK(d1(x).value().to_vector() != a);  // the generator moved on: a new mask
    REQUIRE_THROWS_WITH(Dropout({.p = 1.0}), "Dropout: probability 1 not in [0, 1)");
}

TEST_CASE("ReLU::forward(x): max(x, 0)", "[nn][layers]") {
    ReLU relu;
    CHECK(relu(Variable(t32({-2, -0.5, 0, 0.5, 3}, {5}))).value().to_vector() == std::vector<double>{0, 0, 0, 0.5, 3});
}

// ============================ LayerNorm and BatchNorm1d ============================

TEST_CASE("LayerNorm(2) and BatchNorm1d(2) on seed 000's X = [[1, 2], [2, 3]]: rows versus columns", "[nn][layers]") {
    // seed 000, 代码实现 → 层归一化: ln = nn.LayerNorm(2); bn = nn.BatchNorm1d(2)
    LayerNorm ln({.normalized_shape = 2});
    BatchNorm1d bn({.num_features = 2});
    const Variable X(t32({1, 2, 2, 3}, {2, 2}));
    // each row and each column has mean ±0.5 away and variance 0.25: ±0.5/√(0.25 + 1e-5) = ±0.99998
    const double v = 0.5 / std::sqrt(0.25 + 1e-5);
    require_values(ln(X).value(), {-v, v, -v, v}, 1e-6);
    require_values(bn(X).value(), {-v, -v, v, v}, 1e-6);

    // one training batch moves the running statistics by momentum 0.1 towards
    // the batch mean [1.5, 2.5] and the UNBIASED batch variance [0.5, 0.5]
    require_values(bn.buffer("running_mean"), {0.1 * 1.5, 0.1 * 2.5}, 1e-7);
    require_values(bn.buffer("running_var"), {0.9 + 0.1 * 0.5, 0.9 + 0.1 * 0.5}, 1e-7);
    CHECK(bn.buffer("num_batches_tracked").dim() == 0);
    CHECK(bn.buffer("num_batches_tracked").item() == 1);

    // eval mode normalises with the running statistics instead
    bn.eval();
    const double s = std::sqrt(0.95 + 1e-5);
    require_values(bn(X).value(), {(1 - 0.15) / s, (2 - 0.25) / s, (2 - 0.15) / s, (3 - 0.25) / s}, 1e-6);
    CHECK(bn.buffer("num_batches_tracked").item() == 1);  // eval does not count batches
}

TEST_CASE("LayerNorm::forward(x): seed 002's hand-written LayerNorm with eps 1e-12", "[nn][layers]") {
    // seed 002, §3.1 Add & Norm, written with core ops:
    //   mean = x.mean(-1, keepdim=True); var = x.var(-1, keepdim=True)
    //   out = (x - mean) / torch.sqrt(var + self.eps); out = self.gamma * out + self.beta
    // torch's x.var() is the UNBIASED variance (÷(D-1)). With it the formula is
    // NOT nn.LayerNorm: (out - beta) is smaller by √((D-1)/D), a difference the
    // note's allclose(rtol=0.1, atol=0.01) lets through. With the biased
    // variance (÷D) it is nn.LayerNorm exactly.
    core::Generator gen(11);
    const int64_t batch = 20, sentence_length = 5, embedding_dim = 10;
    const Tensor x = core::randn({batch, sentence_length, embedding_dim}, gen, DType::float64);
    LayerNorm ln({.normalized_shape = embedding_dim, .eps = 1e-12});
    ln.to(DType::float64);

    auto hand_written = [&](bool unbiased) {
        const Tensor mean = core::mean(x, {-1}, true);
        const Tensor var = core::var(x, {-1}, unbiased, true);
        const Tensor out = core::div(core::sub(x, mean), core::sqrt(core::add(var, 1e-12)));
        return core::add(core::mul(ln.weight.value(), out), ln.bias.value());
    };
    SECTION("with the biased variance it is the library LayerNorm (gamma and beta random)") {
        init::uniform_(ln.weight, 0.5, 1.5, gen);
        init::uniform_(ln.bias, -0.5, 0.5, gen);
        require_values(ln(Variable(x)).value(), hand_written(false).to_vector(), 1e-12);
    }
    SECTION("with torch's default unbiased x.var() it differs by √((D-1)/D) but passes the note's allclose") {
        // the note's comparison: both layers fresh, gamma = 1, beta = 0
        const std::vector<double> note = hand_written(true).to_vector();
        const std::vector<double> library = ln(Variable(x)).value().to_vector();
        const double factor = std::sqrt((embedding_dim - 1.0) / embedding_dim);
        double largest_gap = 0;
        for (size_t i = 0; i < note.size(); ++i) {
            CHECK(note[i] == Approx(library[i] * factor).margin(1e-12));
            CHECK(std::abs(note[i] - library[i]) <= 0.01 + 0.1 * std::abs(library[i]));  // torch.allclose
            largest_gap = std::max(largest_gap, std::abs(note[i] - library[i]));
        }
        CHECK(largest_gap > 0.05);  // a real difference, not rounding
    }
}

TEST_CASE("LayerNorm({.unbiased_std = true}): seed 004's a_2 (x - mean) / (std + eps) + b_2 on hand numbers",
          "[nn][layers]") {
    // x = [1, 2, 3, 4]: mean 2.5, x - mean = [-1.5, -0.5, 0.5, 1.5], Σ(x - mean)² = 5
    //   seed 004:  std = √(5/3) = 1.2910, y = (x - mean) / (1.2910 + 1e-6)
    //   standard:  var = 5/4,            y = (x - mean) / √(1.25 + 1e-5)
    const Variable x(t64({1, 2, 3, 4}, {1, 4}));
    LayerNorm annotated({.normalized_shape = 4, .eps = 1e-6, .unbiased_std = true});
    LayerNorm standard({.normalized_shape = 4});
    annotated.to(DType::float64);
    standard.to(DType::float64);
    const double sd = std::sqrt(5.0 / 3.0) + 1e-6, sv = std::sqrt(1.25 + 1e-5);
    require_values(annotated(x).value(), {-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd}, 1e-12);
    require_values(standard(x).value(), {-1.5 / sv, -0.5 / sv, 0.5 / sv, 1.5 / sv}, 1e-12);
    CHECK(annotated(x).value().at({0, 3}) == Approx(1.161895).epsilon(1e-6));
    CHECK(standard(x).value().at({0, 3}) == Approx(1.341635).epsilon(1e-6));

    // a_2 scales and b_2 shifts; without affine there are no parameters
    core::copy_(annotated.weight.value(), t64({1, 2, 3, 4}, {4}));
    core::copy_(annotated.bias.value(), t64({0, 0, 0, 10}, {4}));
    require_values(annotated(x).value(), {-1.5 / sd, -1.0 / sd, 1.5 / sd, 6.0 / sd + 10}, 1e-12);
    LayerNorm bare({.normalized_shape = 4, .eps = 1e-6, .elementwise_affine = false, .unbiased_std = true});
    CHECK(bare.named_parameters().empty());
    require_values(bare(Variable(t32({1, 2, 3, 4}, {4}))).value(), {-1.5 / sd, -0.5 / sd, 0.5 / sd, 1.5 / sd}, 1e-6);
}

TEST_CASE("LayerNorm::forward(x): a wrong last dimension and bad options are named", "[nn][layers]") {
    LayerNorm ln({.normalized_shape = 4});
    REQUIRE_THROWS_AS(ln(Variable(core::zeros({2, 3}))), ShapeError);
    REQUIRE_THROWS_WITH(ln(Variable(core::zeros({2, 3}))),
                        "LayerNorm: input of shape (2x3) must be (..., normalized_shape=4)");
    REQUIRE_THROWS_WITH(LayerNorm({.normalized_shape = 1, .unbiased_std = true}),
                        Contains("LayerNorm: the unbiased std divides by D - 1"));
    REQUIRE_THROWS_WITH(LayerNorm({.normalized_shape = 0}), "LayerNorm: normalized_shape must be positive, got 0");
}

TEST_CASE("BatchNorm1d::forward(x): (N, C, L) input normalises each channel over N and L, with affine",
          "[nn][layers]") {
    BatchNorm1d bn({.num_features = 2, .momentum = 0.5});
    core::copy_(bn.weight.value(), t32({2, 3}, {2}));
    core::copy_(bn.bias.value(), t32({1, -1}, {2}));
    // channel 0 holds {1, 2, 3, 4} (mean 2.5, biased var 1.25, unbiased 5/3),
    // channel 1 holds {0, 0, 2, 2} (mean 1, biased var 1, unbiased 4/3)
    const Variable x(t32({1, 2, 0, 0, 3, 4, 2, 2}, {2, 2, 2}));
    const double s0 = std::sqrt(1.25 + 1e-5), s1 = std::sqrt(1.0 + 1e-5);
    auto c0 = [&](double v) { return 2 * (v - 2.5) / s0 + 1; };
    auto c1 = [&](double v) { return 3 * (v - 1.0) / s1 - 1; };
    require_values(bn(x).value(), {c0(1), c0(2), c1(0), c1(0), c0(3), c0(4), c1(2), c1(2)}, 1e-5);
    require_values(bn.buffer("running_mean"), {0.5 * 2.5, 0.5 * 1.0}, 1e-6);
    require_values(bn.buffer("running_var"), {0.5 + 0.5 * 5.0 / 3.0, 0.5 + 0.5 * 4.0 / 3.0}, 1e-6);
    bn(x);
    CHECK(bn.buffer("num_batches_tracked").item() == 2);
    require_values(bn.buffer("running_mean"), {0.75 * 2.5, 0.75 * 1.0}, 1e-6);
}

TEST_CASE("BatchNorm1d::forward(x): wrong shapes and a one-value batch are named", "[nn][layers]") {
    BatchNorm1d bn({.num_features = 4});
    REQUIRE_THROWS_AS(bn(Variable(core::zeros({2, 3}))), ShapeError);
    REQUIRE_THROWS_WITH(bn(Variable(core::zeros({2, 3}))),
                        "BatchNorm1d: expected input of shape (N, 4) or (N, 4, L), got (2x3)");
    REQUIRE_THROWS_WITH(bn(Variable(core::zeros({4}))),
                        "BatchNorm1d: expected input of shape (N, 4) or (N, 4, L), got (4)");
    REQUIRE_THROWS_WITH(bn(Variable(core::zeros({1, 4}))),
                        "BatchNorm1d: expected more than 1 value per channel when training, got input of shape (1x4)");
    bn.eval();  // running statistics need no batch
    require_values(bn(Variable(core::ones({1, 4}))).value(), std::vector<double>(4, 1 / std::sqrt(1 + 1e-5)), 1e-6);
}

// ============================ PositionalEncoding ============================

TEST_CASE("PositionalEncoding(options): P[0, pos, 2i] = sin(pos/10000^(2i/d)), P[0, pos, 2i+1] = cos(...)",
          "[nn][layers]") {
    const int64_t d = 8;
    PositionalEncoding pe({.num_hiddens = d, .dropout = 0.0, .max_len = 60});
    CHECK(pe.P.shape() == core::Shape{1, 60, d});
    CHECK(pe.P.at({0, 0, 0}) == 0.0);
    CHECK(pe.P.at({0, 0, 1}) == 1.0);
    CHECK(pe.P.at({0, 1, 0}) == Approx(std::sin(1.0)).margin(1e-7));
    CHECK(pe.P.at({0, 1, 1}) == Approx(std::cos(1.0)).margin(1e-7));
    for (int64_t p : {0, 1, 7, 59}) {
        CHECK(pe.P.at({0, p, 2}) == Approx(std::sin(p / std::pow(10000.0, 2.0 / d))).margin(1e-6));
        for (int64_t i = 0; 2 * i < d; ++i) {
            const double angle = p / std::pow(10000.0, 2.0 * i / d);
            CHECK(pe.P.at({0, p, 2 * i}) == Approx(std::sin(angle)).margin(1e-6));
            CHECK(pe.P.at({0, p, 2 * i + 1}) == Approx(std::cos(angle)).margin(1e-6));
        }
    }
    // the table is an attribute, not a buffer: nothing in the state dict
    CHECK(pe.state_dict().empty());
    // each entry is the double-precision value rounded once to float
    for (int64_t p : {3, 59})
        for (int64_t j = 0; j < d; ++j) {
            const double angle = p / std::pow(10000.0, static_cast<double>(j - j % 2) / d);
            CHECK(pe.P.at({0, p, j}) == static_cast<float>(j % 2 ? std::cos(angle) : std::sin(angle)));
        }
    // and it is written straight into float32: building it allocates the table alone
    const int64_t before = core::storage_bytes();
    core::reset_storage_peak();
    PositionalEncoding big({.num_hiddens = 64, .max_len = 1000});
    CHECK(core::storage_peak_bytes() - before == 1000 * 64 * 4);

    // odd d: the last column is a sine with no cosine partner
    PositionalEncoding odd({.num_hiddens = 3, .max_len = 5});
    CHECK(odd.P.at({0, 4, 2}) == Approx(std::sin(4 / std::pow(10000.0, 2.0 / 3))).margin(1e-6));
}

TEST_CASE("PositionalEncoding::forward(X, start): adds P[:, start : start + T, :], checks max_len", "[nn][layers]") {
    PositionalEncoding pe({.num_hiddens = 4, .max_len = 10});
    const Variable X(core::full({2, 3, 4}, 1.0), true);
    const Variable Y = pe(X, 5);
    CHECK(Y.shape() == core::Shape{2, 3, 4});
    for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < 3; ++t)
            for (int64_t j = 0; j < 4; ++j) CHECK(Y.value().at({b, t, j}) == Approx(1.0 + pe.P.at({0, 5 + t, j})));
    // P is a constant: the gradient with respect to X is exactly one
    autograd::sum(Y).backward();
    CHECK(X.grad().to_vector() == std::vector<double>(24, 1.0));

    CHECK(pe(X, 7).shape() == core::Shape{2, 3, 4});  // positions 7, 8, 9: the last ones
    REQUIRE_THROWS_AS(pe(X, 8), IndexError);
    REQUIRE_THROWS_WITH(pe(X, 8), "PositionalEncoding: positions 8 to 10 (start 8 + 3 steps) exceed max_len 10");
    REQUIRE_THROWS_WITH(pe(X, -1), "PositionalEncoding: start -1 must be non-negative");
    REQUIRE_THROWS_WITH(pe(Variable(core::zeros({2, 3, 5}))),
                        "PositionalEncoding: expected X of shape (B, T, 4), got (2x3x5)");
}

TEST_CASE("PositionalEncoding::forward(X): dropout in training mode, none in eval mode", "[nn][layers]") {
    core::Generator gen(12);
    PositionalEncoding pe({.num_hiddens = 4, .dropout = 0.5, .max_len = 10}, gen);
    const Variable X(core::zeros({2, 5, 4}));
    const std::vector<double> y = pe(X).value().to_vector();
    const std::vector<double> plain = pe.P.slice(1, 0, 5).expand({2, 5, 4}).contiguous().to_vector();
    int64_t dropped = 0;
    for (size_t i = 0; i < y.size(); ++i) {
        if (y[i] == 0 && plain[i] != 0) ++dropped;
        if (y[i] != 0) CHECK(y[i] == Approx(2 * plain[i]));  // survivors scaled by 1/(1-0.5)
    }
    CHECK(dropped > 0);
    pe.eval();
    CHECK(pe(X).value().to_vector() == plain);
}

// ============================ Sequential ============================

TEST_CASE("Sequential::forward(x): applies the modules in order, empty is the identity", "[nn][layers]") {
    core::Generator gen(13);
    auto mlp = small_mlp(gen);
    auto& first = dynamic_cast<Linear&>((*mlp)[0]);
    auto& last = dynamic_cast<Linear&>((*mlp)[2]);
    const Variable x(core::randn({5, 3}, gen));
    const Variable by_hand = last(autograd::relu(first(x)));
    CHECK((*mlp)(x).value().to_vector() == by_hand.value().to_vector());

    Sequential empty;
    CHECK(empty(x).value().to_vector() == x.value().to_vector());
    REQUIRE_THROWS_WITH(empty.push_back(nullptr), Contains("child module '0' is null"));
}

// ============================ init ============================

TEST_CASE("init::xavier_uniform_(w): U(-a, a) with a = gain·√(6/(fan_in + fan_out)), in place", "[nn][layers]") {
    core::Generator gen(14);
    struct Case {
        core::Shape shape;
        double gain;
        double bound;
    };
    const std::vector<Case> cases = {
        {{200, 300}, 1.0, std::sqrt(6.0 / 500)},
        {{200, 300}, 2.0, 2 * std::sqrt(6.0 / 500)},
        {{40, 30, 5}, 1.0, std::sqrt(6.0 / (150 + 200))},  // fans times the receptive field 5
    };
    for (const Case& c : cases) {
        INFO("shape " << core::shape_str(c.shape) << " gain " << c.gain);
        const Variable w(core::zeros(c.shape), true);
        const void* storage = w.value().raw_data();
        init::xavier_uniform_(w, gen, c.gain);
        CHECK(w.value().raw_data() == storage);
        const std::vector<double> v = w.value().to_vector();
        double largest = 0, mean = 0, var = 0;
        for (double x : v) largest = std::max(largest, std::abs(x)), mean += x;
        mean /= v.size();
        for (double x : v) var += (x - mean) * (x - mean);
        var /= v.size();
        CHECK(largest <= c.bound);
        CHECK(largest > 0.99 * c.bound);
        CHECK(std::abs(mean) < 0.02 * c.bound);
        CHECK(var == Approx(c.bound * c.bound / 3).epsilon(0.03));  // U(-a, a) has variance a²/3
    }
    REQUIRE_THROWS_WITH(init::xavier_uniform_(Variable(core::zeros({5}))),
                        "xavier_uniform_: fan in and fan out need a weight with at least 2 dimensions, got shape (5)");
}

TEST_CASE("init::normal_ / uniform_ / constant_ / zeros_ / ones_ / linear_default_: values and errors",
          "[nn][layers]") {
    core::Generator gen(15);
    const Variable w(core::zeros({100000}, DType::float64));
    init::normal_(w, 1.0, 2.0, gen);
    const std::vector<double> v = w.value().to_vector();
    double mean = 0, var = 0;
    for (double x : v) mean += x;
    mean /= v.size();
    for (double x : v) var += (x - mean) * (x - mean);
    CHECK(mean == Approx(1.0).margin(0.03));  // σ/√n = 0.006
    CHECK(std::sqrt(var / v.size()) == Approx(2.0).margin(0.03));

    init::uniform_(w, 3.0, 4.0, gen);
    for (double x : w.value().to_vector()) REQUIRE((x >= 3.0 && x < 4.0));
    init::linear_default_(w, 25, gen);
    for (double x : w.value().to_vector()) REQUIRE(std::abs(x) <= 0.2);

    const Variable small(core::zeros({2, 2}));
    init::constant_(small, 0.25);
    CHECK(small.value().to_vector() == std::vector<double>(4, 0.25));
    init::ones_(small);
    CHECK(small.value().to_vector() == std::vector<double>(4, 1.0));
    init::zeros_(small);
    CHECK(small.value().to_vector() == std::vector<double>(4, 0.0));

    REQUIRE_THROWS_WITH(init::uniform_(small, 1, 0, gen), "uniform_: low 1 must not exceed high 0");
    REQUIRE_THROWS_WITH(init::normal_(small, 0, -1, gen), "normal_: standard deviation -1 must be non-negative");
    REQUIRE_THROWS_WITH(init::zeros_(Variable(core::zeros({2}, DType::int64))),
                        "zeros_: expected a float32 or float64 parameter, got int64");
    REQUIRE_THROWS_WITH(init::ones_(Variable()), "ones_: the Variable is undefined");
}
