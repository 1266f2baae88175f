// Tutorial 04 · Attention pooling: average pooling and Nadaraya–Watson
// kernel regression, non-parametric and with a learned width w.
//
// Follows seed 003 (003_8fde783e4908788c.txt), 注意力汇聚：查询和键的相互作用:
// 平均汇聚 f(x) = 1/n Σ y_i, 非参数注意力汇聚 f(x) = Σ softmax(-(x - x_i)²/2) y_i,
// 带参数注意力汇聚 f(x) = Σ softmax(-((x - x_i) w)²/2) y_i. The seed gives the
// formulas; the data and the training run (50 points, y = 2 sin x + x^0.8 + noise,
// 5 epochs of SGD with lr 0.5) are those of the d2l section it is taken from,
// as nn/attention_pooling.hpp explains.
// Read it with tutorials/04_attention_pooling/README.md.
// tutorial-languages: en zh
#include "common/prelude.hpp"
#include "exercise.hpp"
#include "nn/attention_pooling.hpp"
#include "optim/sgd.hpp"
#include "tasks/plot.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

namespace {

// Mean squared error between a prediction and the noise-free truth on the test grid.
double mse(const c::Tensor& prediction, const c::Tensor& truth) {
    const std::vector<double> p = prediction.to_vector(), y = truth.to_vector();
    double total = 0;
    for (size_t i = 0; i < p.size(); ++i) total += (p[i] - y[i]) * (p[i] - y[i]);
    return total / static_cast<double>(p.size());
}

// The largest row sum error |Σ_j w[i, j] - 1| of a (n, m) weight matrix.
double worst_row_sum_error(const c::Tensor& weights) {
    const c::Tensor sums = c::sum(weights, {1});
    double worst = 0;
    for (double s : sums.to_vector()) worst = std::max(worst, std::abs(s - 1));
    return worst;
}

// The mean over rows of the largest weight in the row: 1 means every query
// looks at a single key, 1/m means the weights are spread evenly.
double mean_row_max(const c::Tensor& weights) {
    const std::vector<double> m = c::max(weights, {1}).to_vector();
    return std::accumulate(m.begin(), m.end(), 0.0) / static_cast<double>(m.size());
}

// x (n) -> (rows, n): the same row repeated, as d2l's x_train.repeat((n_test, 1)).
c::Tensor repeat_rows(const c::Tensor& x, int64_t rows) {
    return x.unsqueeze(0).expand({rows, x.size(0)}).contiguous();
}

// What the steps share: d2l's data, and the fits that step 7 draws.
struct Lesson {
    c::Generator gen{4};
    const nn::PoolingData data = nn::make_pooling_data(50, gen);  // x_train, y_train (50); x_test, y_truth (50)
    const int64_t n_train = data.x_train.size(0), n_test = data.x_test.size(0);
    const Variable x_train{data.x_train}, y_train{data.y_train}, x_test{data.x_test};  // (50) each

    // Filled in by the steps and drawn in the last one.
    c::Tensor y_average, y_plain, y_learned;   // (n_test): the three fits on the test grid
    c::Tensor weights_plain, weights_learned;  // (n_test, n_train): α(x, x_i), a row per query
    double mse_average = 0, mse_plain = 0, mse_learned = 0, w_learned = 0;
};

// ---- the steps --------------------------------------------------------------------------

// seed 003 (003_8fde783e4908788c.txt) › 注意力机制 › 查询、键和值
void queries_keys_values(Tutorial& t) {
    note({.en = "Seed 003 introduces the three names with a search engine: the QUERY is what you type, the KEYS "
                "identify the documents (their keywords), the VALUES are the documents returned. The engine "
                "compares the query with every key and returns the values the best keys belong to. Attention "
                "pooling does the same softly: it scores the query against every key, turns the scores into "
                "weights with a softmax, and returns the weighted average of the values. Five pages, each key a "
                "bag of keywords, each value the page itself (a one-hot vector); the query is 'deep learning':",
          .zh = "种子文档 003 "
                "用搜索引擎引出这三个名字：查询（query）是你输入的内容，键（key）标识各个文档（它们的关键词），"
                "值（value）是返回的文档。搜索引擎把查询与每个键比较，返回最匹配的键所对应的值。注意力汇聚把这件事"
                "“软”着做：给查询与每个键打分，用 softmax 把分数变成权重，再返回各个值的加权平均。下面有五个网页，"
                "每个键是一袋关键词，每个值就是网页本身（一个独热向量）；查询是 “deep learning”："});
    const std::vector<std::string> words = {"deep",    "learning", "book",   "code",    "sea",
                                            "fishing", "machine",  "course", "cooking", "swim"};
    const std::vector<Text> pages = {{.en = "动手学深度学习 (Dive into Deep Learning)", .zh = "动手学深度学习"},
                                     {.en = "A guide to deep-sea fishing", .zh = "深海捕鱼指南"},
                                     {.en = "A machine learning course", .zh = "一门机器学习课程"},
                                     {.en = "The cooking book", .zh = "烹饪之书"},
                                     {.en = "Learning to swim", .zh = "学游泳"}};
    const std::vector<std::vector<int>> keywords = {{0, 1, 2, 3}, {0, 4, 5}, {6, 1, 7}, {8, 2}, {1, 9}};
    c::Tensor K = c::zeros({5, static_cast<int64_t>(words.size())}, DType::float64);  // (pages, words)
    for (int64_t p = 0; p < 5; ++p)
        for (int w : keywords[p]) K.set({p, w}, 1.0);
    c::Tensor q = c::zeros({static_cast<int64_t>(words.size())}, DType::float64);
    q.set({0}, 1.0);
    q.set({1}, 1.0);
    const c::Tensor values = c::eye(5, DType::float64);               // page p's value: e_p
    const c::Tensor scores = c::matmul(K, q.unsqueeze(1)).view({5});  // shared keywords per page
    for (int64_t p = 0; p < 5; ++p) {
        std::string kw;
        for (int w : keywords[p]) kw += (kw.empty() ? "" : ", ") + words[w];
        note({.en = "    score {:.0f}   {:<42} keys: {}", .zh = "    分数 {:.0f}   {:<42} 键：{}"}, scores.at({p}),
             phrase(pages[p]), kw);
    }
    auto pool = [&](double temperature) {  // softmax(scores / τ) · values: a distribution over the pages
        return c::matmul(c::softmax(c::div(scores, temperature)).unsqueeze(0), values).view({5});
    };
    line({.en = "\n      τ        weights of the five pages (softmax(score / τ))",
          .zh = "\n      τ        五个网页的权重（softmax(分数 / τ)）"});
    for (double tau : {0.01, 0.5, 1.0, 1000.0})
        line("      {:<7}  {:.4f}", tau, fmt::join(pool(tau).to_vector(), "  "));
    line();
    const c::Tensor soft = pool(1.0);
    t.check(c::argmax(soft, 0).item() == 0,
            {.en = "the best-scoring key belongs to 《动手学深度学习》: it gets the largest weight",
             .zh = "分数最高的键属于《动手学深度学习》：它得到最大的权重"});
    t.check_close(c::sum(soft).item(), 1.0, 1e-12,
                  {.en = "the weights are a distribution over the pages", .zh = "这些权重是网页上的一个概率分布"});
    t.check(pool(0.01).at({0}) > 0.999, {.en = "τ → 0: all weight on the best key, a hard lookup like a dictionary's",
                                         .zh = "τ → 0：全部权重落在最好的键上，就像字典那样的硬查找"});
    t.check(c::max(c::abs(c::sub(pool(1000.0), c::full({5}, 0.2, DType::float64)))).item() < 0.001,
            {.en = "τ → ∞: 1/5 each, the query ignored: average pooling (step 3)",
             .zh = "τ → ∞：每个 1/5，查询被忽略：即平均汇聚（第 3 步）"});
    note({.en = "The engine of seed 003 is the limit τ → 0; the rest of this tutorial uses scores that depend on "
                "distance (x - x_i)², and the same softmax. (The seed's next heading, 注意力汇聚：查询和键的相互租用, "
                "has a typo: 租用 'rent' for 作用, 'interact'.)",
          .zh = "种子文档 003 的搜索引擎是 τ → 0 的极限情形；本教程其余部分用依赖距离 (x - x_i)² 的分数，softmax 不变。"
                "（种子文档的下一个标题“注意力汇聚：查询和键的相互租用”有个笔误：“租用”应为“作用”。）"});
}

// seed 003 (003_8fde783e4908788c.txt) › 注意力汇聚：查询和键的相互租用 [sic] (d2l's data)
void the_data(Tutorial& t, const Lesson& lesson) {
    note({.en = "Seed 003 explains attention pooling as regression: we know n pairs (x_i, y_i) and want f(x) "
                "at new points x. In attention words the new point x is the QUERY, the training inputs x_i are "
                "the KEYS and the training outputs y_i are the VALUES. The data are d2l's: 50 inputs drawn "
                "uniformly from [0, 5) and sorted, outputs y_i = 2 sin(x_i) + x_i^0.8 + ε with ε ~ N(0, 0.5²), "
                "and a test grid x = 0, 0.1, ..., 4.9 where we compare with the noise-free f.",
          .zh =
              "种子文档 003 把注意力汇聚讲成回归问题：已知 n 对 (x_i, y_i)，想求新点 x 处的 f(x)。用注意力的话说，新点 "
              "x "
              "是查询，训练输入 x_i 是键，训练输出 y_i 是值。数据取自 d2l：在 [0, 5) 上均匀抽取 50 个输入并排序，输出 "
              "y_i = 2 sin(x_i) + x_i^0.8 + ε，其中 ε ~ N(0, 0.5²)；测试网格为 x = 0, 0.1, ..., 4.9，在那里与无噪声的 "
              "f 比较。"});
    const nn::PoolingData& data = lesson.data;
    show("x_train[:6]", data.x_train.slice(0, 0, 6));
    show("y_train[:6]", data.y_train.slice(0, 0, 6));
    show("x_test[:6] ", data.x_test.slice(0, 0, 6));
    const std::vector<double> x = data.x_train.to_vector();
    t.check(lesson.n_train == 50 && lesson.n_test == 50,
            {.en = "50 training pairs and 50 test points", .zh = "50 对训练数据，50 个测试点"});
    t.check(std::is_sorted(x.begin(), x.end()) && x.front() >= 0 && x.back() < 5,
            {.en = "the training inputs are sorted and lie in [0, 5)", .zh = "训练输入已排序，且都在 [0, 5) 内"});
    t.check_close(data.y_truth.at({10}), 2 * std::sin(1.0) + 1.0, 1e-6, both("f(1) = 2 sin(1) + 1^0.8 = 2.683"));
}

// seed 003 (003_8fde783e4908788c.txt) › 平均汇聚
void average_pooling(Tutorial& t, Lesson& lesson) {
    note({.en = "The simplest estimator ignores the query altogether and predicts the mean of all training "
                "outputs everywhere. In attention language: every key gets the same weight 1/n, whatever the "
                "query is.",
          .zh = "最简单的估计器完全不看查询，处处都预测所有训练输出的平均值。用注意力的话说：不论查询是什么，每个键都"
                "得到相同的权重 1/n。"});
    lesson.y_average = nn::average_pooling(lesson.x_test, lesson.y_train).value();
    show("f(x_test)[:6]", lesson.y_average.slice(0, 0, 6));
    const std::vector<double> y = lesson.data.y_train.to_vector();
    const double mean = std::accumulate(y.begin(), y.end(), 0.0) / static_cast<double>(y.size());
    t.check_close(
        lesson.y_average, c::full({lesson.n_test}, mean), 1e-5,
        {.en = "every prediction is the mean of y_train, {:.4f}", .zh = "每个预测都是 y_train 的平均值 {:.4f}"}, mean);
    lesson.mse_average = mse(lesson.y_average, lesson.data.y_truth);
    note({.en = "Its error against the true f on the test grid is large: a flat line cannot follow a sine.",
          .zh = "在测试网格上，它与真实 f 的误差很大：一条水平线跟不上正弦曲线。"});
    note({.en = "    test MSE, average pooling: {:.4f}", .zh = "    测试 MSE，平均汇聚：{:.4f}"}, lesson.mse_average);
}

// seed 003 (003_8fde783e4908788c.txt) › 非参数注意力汇聚
void nonparametric_pooling(Tutorial& t, Lesson& lesson) {
    note({.en = "Nadaraya and Watson weight each y_i by how close its key x_i is to the query x:\n"
                "    α(x, x_i) = exp(-(x - x_i)²/2) / Σ_j exp(-(x - x_j)²/2) = softmax_i(-(x - x_i)²/2)\n"
                "    f(x) = Σ_i α(x, x_i) y_i\n"
                "The score -(x - x_i)²/2 is largest (0) for a key equal to the query, so close keys 'get more "
                "attention'. The weights are a probability distribution over the keys: non-negative, summing "
                "to 1. Here it is by hand for the query x = 2.5 (test point 25):",
          .zh = "Nadaraya 和 Watson 按键 x_i 离查询 x 有多近来给每个 y_i 加权：\n"
                "    α(x, x_i) = exp(-(x - x_i)²/2) / Σ_j exp(-(x - x_j)²/2) = softmax_i(-(x - x_i)²/2)\n"
                "    f(x) = Σ_i α(x, x_i) y_i\n"
                "分数 -(x - x_i)²/2 在键等于查询时最大（为 0），所以近的键“得到更多注意力”。这些权重是键上的一个概率"
                "分布：非负，和为 1。下面对查询 x = 2.5（第 25 个测试点）手工算一遍："});
    const int64_t q = 25, n_train = lesson.n_train;
    const double query = lesson.data.x_test.at({q});
    const std::vector<double> xs = lesson.data.x_train.to_vector(), ys = lesson.data.y_train.to_vector();
    std::vector<double> score(n_train), alpha(n_train);
    for (int64_t i = 0; i < n_train; ++i) score[i] = -0.5 * (query - xs[i]) * (query - xs[i]);
    const double top = *std::max_element(score.begin(), score.end());  // subtract the max: exp never overflows
    double total = 0;
    for (int64_t i = 0; i < n_train; ++i) total += alpha[i] = std::exp(score[i] - top);
    double by_hand = 0;
    for (int64_t i = 0; i < n_train; ++i) by_hand += (alpha[i] /= total) * ys[i];

    std::vector<int64_t> order(n_train);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return alpha[a] > alpha[b]; });
    line({.en = "\n      key i     x_i    score -(x-x_i)²/2    α(2.5, x_i)     y_i",
          .zh = "\n       键 i     x_i     分数 -(x-x_i)²/2    α(2.5, x_i)     y_i"});
    for (int k = 0; k < 5; ++k) {
        const int64_t i = order[k];
        line("      {:>5} {:>7.3f} {:>20.4f} {:>14.4f} {:>7.3f}", i, xs[i], score[i], alpha[i], ys[i]);
    }
    line({.en = "      ... 45 more keys, the farthest with α = {:.2e}\n",
          .zh = "      ……还有 45 个键，最远的 α = {:.2e}\n"},
         alpha[order.back()]);

    const nn::PoolingOutput pooled = nn::nadaraya_watson(lesson.x_test, lesson.x_train, lesson.y_train);
    lesson.y_plain = pooled.output.value();
    lesson.weights_plain = pooled.attention_weights;
    describe("nadaraya_watson(x_test, x_train, y_train).attention_weights", lesson.weights_plain);
    t.check_close(pooled.attention_weights.select(0, q), c::tensor(alpha, {n_train}), 1e-6,
                  {.en = "row 25 of nn::nadaraya_watson's weights equals the hand-computed α(2.5, x_i)",
                   .zh = "nn::nadaraya_watson 权重的第 25 行等于手算的 α(2.5, x_i)"});
    t.check_close(lesson.y_plain.at({q}), by_hand, 1e-5,
                  {.en = "f(2.5) = Σ α y_i = {:.4f}, by hand and by the library",
                   .zh = "f(2.5) = Σ α y_i = {:.4f}，手算与库的结果一致"},
                  by_hand);
    t.check(worst_row_sum_error(lesson.weights_plain) < 1e-5,
            {.en = "each of the 50 rows of weights sums to 1", .zh = "权重的 50 行每一行之和都是 1"});
    lesson.mse_plain = mse(lesson.y_plain, lesson.data.y_truth);
    note({.en = "    test MSE, average pooling:         {:.4f}\n"
                "    test MSE, non-parametric pooling:  {:.4f}",
          .zh = "    测试 MSE，平均汇聚：      {:.4f}\n"
                "    测试 MSE，非参数注意力汇聚：{:.4f}"},
         lesson.mse_average, lesson.mse_plain);
    t.check(lesson.mse_plain < lesson.mse_average,
            {.en = "non-parametric pooling fits the test grid better than average pooling",
             .zh = "在测试网格上，非参数注意力汇聚比平均汇聚拟合得好"});
}

// Step 5, part 1: d2l's 5 epochs of SGD on w, the first gradient checked by central differences.
void train_w(Tutorial& t, Lesson& lesson, nn::NWKernelRegression& net, const c::Tensor& keys, const c::Tensor& values) {
    const double w0 = net.w.item();
    note({.en = "\nThe loss is d2l's: the squared errors (ŷ_i - y_i)² summed over the 50 training points; "
                "5 epochs of plain SGD with lr 0.5, each one a single full-batch step. Initial w = {:.4f}.",
          .zh = "\n损失取自 d2l：50 个训练点上的平方误差 (ŷ_i - y_i)² 之和；用学习率 0.5 的普通 SGD 训练 5 个迭代周期，"
                "每个周期是一次全批量更新。初始 w = {:.4f}。"},
         w0);

    // One check that backward() gets dloss/dw right before we trust it for training.
    auto loss_at = [&](double w) {
        ag::NoGradGuard no_grad;
        const c::Tensor saved = net.w.value().clone();
        c::fill_(net.w.value(), w);
        const Variable err = net(lesson.x_train, Variable(keys), Variable(values)) - lesson.y_train;
        const double loss = ag::sum(err * err).item();
        c::copy_(net.w.value(), saved);
        return loss;
    };

    optim::SGD sgd(net.parameters(), {.lr = 0.5});
    std::vector<double> losses, grads;
    line({.en = "\n      epoch    loss (Σ squared errors)    w before the step    dloss/dw",
          .zh = "\n       周期      损失（平方误差之和）        更新前的 w    dloss/dw"});
    for (int epoch = 1; epoch <= 5; ++epoch) {
        sgd.zero_grad();
        const Variable err = net(lesson.x_train, Variable(keys), Variable(values)) - lesson.y_train;  // (50)
        const Variable loss = ag::sum(err * err);                                                     // ()
        loss.backward();
        grads.push_back(net.w.grad().item());
        losses.push_back(loss.item());
        line("      {:>5} {:>24.4f} {:>20.4f} {:>11.4f}", epoch, loss.item(), net.w.item(), grads.back());
        sgd.step();  // w <- w - 0.5 · dloss/dw
    }
    lesson.w_learned = net.w.item();
    line({.en = "      after the 5th step w = {:.4f}\n", .zh = "      第 5 次更新之后 w = {:.4f}\n"}, lesson.w_learned);
    t.check(losses.back() < losses.front(), {.en = "the training loss went down", .zh = "训练损失下降了"});
    const double h = 1e-3;  // float32 values: a larger step than gradcheck's 1e-6
    const double numerical = (loss_at(w0 + h) - loss_at(w0 - h)) / (2 * h);
    t.check_close(grads.front(), numerical, 2e-2 * std::abs(numerical) + 1e-2,
                  {.en = "the first dloss/dw from backward() agrees with central differences ({:.4f})",
                   .zh = "backward() 给出的第一个 dloss/dw 与中心差分（{:.4f}）一致"},
                  numerical);
    note({.en = "The first step alone moves w from {:.2f} to {:.2f}: lr 0.5 times a gradient of {:.1f}. The loss "
                "is a SUM over 50 points, so its gradient, and with it the step, is large. After that the "
                "gradient is small and w creeps back.",
          .zh = "仅第一步就把 w 从 {:.2f} 移到 {:.2f}：学习率 0.5 乘以梯度 {:.1f}。损失是 50 个点上的“和”，所以它的梯度"
                "以及随之而来的步长都很大。此后梯度很小，w 慢慢往回挪。"},
         w0, w0 - 0.5 * grads.front(), grads.front());
}

// Step 5, part 2: the learned w on the test grid, against the fits of steps 3 and 4.
void test_learned_w(Tutorial& t, Lesson& lesson, nn::NWKernelRegression& net) {
    note({.en = "\nAt test time every test point is a query against all 50 training pairs (d2l: keys = "
                "x_train.repeat((n_test, 1))):",
          .zh =
              "\n测试时，每个测试点都是一个查询，面对全部 50 对训练数据（d2l：keys = x_train.repeat((n_test, 1))）："});
    ag::NoGradGuard no_grad;
    const int64_t n_test = lesson.n_test;
    lesson.y_learned = net(lesson.x_test, Variable(repeat_rows(lesson.data.x_train, n_test)),
                           Variable(repeat_rows(lesson.data.y_train, n_test)))
                           .value();
    lesson.weights_learned = net.attention_weights;
    lesson.mse_learned = mse(lesson.y_learned, lesson.data.y_truth);
    note({.en = "    test MSE, average pooling:         {:.4f}\n"
                "    test MSE, non-parametric (w = 1):  {:.4f}\n"
                "    test MSE, parametric (w = {:.2f}):  {:.4f}",
          .zh = "    测试 MSE，平均汇聚：          {:.4f}\n"
                "    测试 MSE，非参数（w = 1）：   {:.4f}\n"
                "    测试 MSE，带参数（w = {:.2f}）：{:.4f}"},
         lesson.mse_average, lesson.mse_plain, lesson.w_learned, lesson.mse_learned);
    t.check(lesson.mse_learned < lesson.mse_average, {.en = "parametric pooling beats average pooling on the test grid",
                                                      .zh = "在测试网格上，带参数注意力汇聚胜过平均汇聚"});
    t.check(lesson.weights_learned.shape() == c::Shape{50, 50} && worst_row_sum_error(lesson.weights_learned) < 1e-5,
            {.en = "its (50, 50) test weights are 50 distributions: every row sums to 1",
             .zh = "它在测试上的 (50, 50) 权重是 50 个分布：每一行之和都是 1"});
    const double plain = mean_row_max(lesson.weights_plain), learned = mean_row_max(lesson.weights_learned);
    note({.en = "\nHow concentrated is the attention? The mean over test queries of the largest weight in the row:\n"
                "    non-parametric (w = 1):  {:.3f}\n"
                "    parametric (w = {:.2f}):  {:.3f}",
          .zh = "\n注意力有多集中？对各测试查询取每行最大权重的平均：\n"
                "    非参数（w = 1）：   {:.3f}\n"
                "    带参数（w = {:.2f}）：{:.3f}"},
         plain, lesson.w_learned, learned);
    if (lesson.w_learned > 1)
        t.check(learned > plain, {.en = "w > 1 narrows the kernel, so each query's weights are more concentrated",
                                  .zh = "w > 1 使核变窄，所以每个查询的权重更集中"});
    else
        t.check(learned <= plain, {.en = "w <= 1 widens the kernel, so each query's weights are more spread out",
                                   .zh = "w <= 1 使核变宽，所以每个查询的权重更分散"});
}

// seed 003 (003_8fde783e4908788c.txt) › 带参数注意力汇聚
void parametric_pooling(Tutorial& t, Lesson& lesson) {
    note({.en = "The kernel's width is fixed above. Seed 003 multiplies the distance by a learned scalar w:\n"
                "    α(x, x_i) = softmax_i(-((x - x_i) w)²/2)\n"
                "A larger w makes the kernel narrower: each query then looks at fewer, closer keys. "
                "nn::NWKernelRegression holds w (initialised uniform in [0, 1), like torch.rand).\n\n"
                "Training uses the training pairs themselves as queries. Each training input x_i must NOT be "
                "one of its own keys (step 6 shows why), so its keys and values are the OTHER 49 pairs: "
                "nn::leave_one_out turns x (50) into a (50, 49) matrix whose row i is x without x_i.",
          .zh = "上面核的宽度是固定的。种子文档 003 把距离乘上一个可学习的标量 w：\n"
                "    α(x, x_i) = softmax_i(-((x - x_i) w)²/2)\n"
                "w 越大核越窄：每个查询只看更少、更近的键。nn::NWKernelRegression 持有 w（在 [0, 1) 上均匀初始化，"
                "同 torch.rand）。\n\n"
                "训练时把训练数据本身当作查询。每个训练输入 x_i 都“不能”是它自己的键（第 6 步说明原因），所以它的键和值"
                "是“另外”49 对：nn::leave_one_out 把 x (50) 变成一个 (50, 49) 矩阵，第 i 行是去掉 x_i 的 x。"});
    const nn::PoolingData& data = lesson.data;
    const c::Tensor keys = nn::leave_one_out(data.x_train), values = nn::leave_one_out(data.y_train);  // (50, 49)
    describe("keys = leave_one_out(x_train)", keys);
    show("keys[:3, :4]", keys.slice(0, 0, 3).slice(1, 0, 4));
    t.check(keys.shape() == c::Shape{50, 49} && keys.at({0, 0}) == data.x_train.at({1}) &&
                keys.at({1, 0}) == data.x_train.at({0}) && keys.at({1, 1}) == data.x_train.at({2}),
            {.en = "row 0 starts at x_1, row 1 is x_0, x_2, ...: the diagonal is left out",
             .zh = "第 0 行从 x_1 开始，第 1 行是 x_0, x_2, ...：对角线被去掉了"});
    nn::NWKernelRegression net(lesson.gen);
    train_w(t, lesson, net, keys, values);
    test_learned_w(t, lesson, net);
}

// seed 003 (003_8fde783e4908788c.txt) › 带参数注意力汇聚 (d2l's leave-one-out training keys)
void not_its_own_key(Tutorial& t, Lesson& lesson) {
    note({.en = "If x_i were among its own keys, its score would be 0, the largest possible, and the "
                "larger w gets, the more weight that one key takes: the prediction at x_i becomes y_i itself, "
                "noise included. The training loss can then be driven to 0 just by growing w, while the "
                "curve gets worse. Evaluating the loss for a few values of w (no training needed):",
          .zh = "如果 x_i 也在它自己的键里，它的分数就是 0，即最大可能值；w 越大，这一个键拿走的权重越多：x_i 处的预测"
                "就变成 y_i 本身，连噪声一起。于是只要增大 w 就能把训练损失压到 0，而曲线却越来越差。对几个 w 求一下"
                "损失（不需要训练）："});
    nn::NWKernelRegression probe(lesson.gen);
    ag::NoGradGuard no_grad;
    const nn::PoolingData& data = lesson.data;
    const Variable self_keys(repeat_rows(data.x_train, lesson.n_train)),
        self_values(repeat_rows(data.y_train, lesson.n_train));
    const Variable loo_keys(nn::leave_one_out(data.x_train)), loo_values(nn::leave_one_out(data.y_train));
    const Variable test_keys(repeat_rows(data.x_train, lesson.n_test)),
        test_values(repeat_rows(data.y_train, lesson.n_test));
    auto sse = [&](const Variable& keys, const Variable& values) {
        const Variable err = probe(lesson.x_train, keys, values) - lesson.y_train;
        return ag::sum(err * err).item();
    };
    std::vector<double> ws = {1, 3, 10, 30, 100}, with_self, left_out, test;
    line({.en = "\n          w    train loss, self as key    train loss, left out    test MSE",
          .zh = "\n          w    训练损失（自己是键）       训练损失（去掉自己）    测试 MSE"});
    for (double w : ws) {
        c::fill_(probe.w.value(), w);
        with_self.push_back(sse(self_keys, self_values));
        left_out.push_back(sse(loo_keys, loo_values));
        test.push_back(mse(probe(lesson.x_test, test_keys, test_values).value(), data.y_truth));
        line("      {:>5} {:>26.4f} {:>23.4f} {:>11.4f}", w, with_self.back(), left_out.back(), test.back());
    }
    line();
    t.check(std::is_sorted(with_self.rbegin(), with_self.rend()) && with_self.back() < 0.05 * with_self.front(),
            {.en = "with itself as a key, the training loss only falls as w grows, towards 0",
             .zh = "自己是键时，训练损失随 w 增大只降不升，趋向 0"});
    t.check(test.back() > *std::min_element(test.begin(), test.end()),
            {.en = "while the test error at w = 100 is worse than at a moderate w: it has memorised the noise",
             .zh = "而 w = 100 时的测试误差比适中的 w 更差：它把噪声背下来了"});
    t.check(left_out.back() > *std::min_element(left_out.begin(), left_out.end()),
            {.en = "the leave-one-out loss does not reward a huge w, so training it is meaningful",
             .zh = "留一法的损失不奖励过大的 w，所以训练它是有意义的"});
    const size_t best = std::min_element(left_out.begin(), left_out.end()) - left_out.begin();
    note({.en = "In this table the leave-one-out loss is smallest at w = {}; the 5 large SGD steps of step 5 "
                "overshot to w ≈ {:.0f}. A smaller learning rate, or more epochs, would settle closer.",
          .zh = "在这张表里，留一法的损失在 w = {} 时最小；第 5 步那 5 次大幅的 SGD 更新冲过了头，到了 w ≈ {:.0f}。"
                "更小的学习率或更多的迭代周期会停得更近。"},
         ws[best], lesson.w_learned);
}

// Step 7, part 1: d2l's two pictures, the fitted curves and the heatmaps of the weights.
void draw_pictures(Tutorial& t, const Lesson& lesson) {
    const nn::PoolingData& data = lesson.data;
    tasks::LinePlot plot{.title = "Nadaraya-Watson attention pooling (seed 003)", .xlabel = "x", .ylabel = "y"};
    const std::vector<double> grid = data.x_test.to_vector();
    plot.series.push_back({.name = "truth", .x = grid, .y = data.y_truth.to_vector()});
    plot.series.push_back(
        {.name = "average pooling", .x = grid, .y = lesson.y_average.to_vector(), .dash = tasks::Dash::dotted});
    plot.series.push_back(
        {.name = "non-parametric", .x = grid, .y = lesson.y_plain.to_vector(), .dash = tasks::Dash::dashed});
    plot.series.push_back({.name = fmt::format("parametric, w = {:.2f}", lesson.w_learned),
                           .x = grid,
                           .y = lesson.y_learned.to_vector()});
    plot.series.push_back({.name = "training data",
                           .x = data.x_train.to_vector(),
                           .y = data.y_train.to_vector(),
                           .style = tasks::SeriesStyle::points,
                           .marker_radius = 3.0});
    const auto curves = t.out_path("pooling_curves.png");
    tasks::plot_lines(curves, plot);

    tasks::Heatmaps maps{.matrices = {{lesson.weights_plain, lesson.weights_learned}},
                         .xlabel = "sorted training inputs (keys)",
                         .ylabel = "testing inputs (queries)",
                         .titles = {"non-parametric, w = 1", fmt::format("parametric, w = {:.2f}", lesson.w_learned)},
                         .title = "attention weights alpha(x, x_i)"};
    const auto heatmap = t.out_path("pooling_weights.png");
    tasks::plot_heatmaps(heatmap, maps);
    note(
        {.en =
             "Wrote\n    {}\n    {}\nThe heatmap is d2l's picture: the test inputs and the sorted training inputs both "
             "increase along their axes, so the weight sits on the diagonal, where key and query are close; "
             "the learned w makes the band {}.",
         .zh =
             "已写出\n    {}\n    {}\n热力图就是 d2l 的那幅图：测试输入和排好序的训练输入都沿各自的轴递增，所以权重落在"
             "对角线上，即键与查询相近的地方；学到的 w 让这条亮带变得{}。"},
        curves.string(), heatmap.string(),
        lesson.w_learned > 1 ? phrase({.en = "narrower", .zh = "更窄"}) : phrase({.en = "wider", .zh = "更宽"}));
}

// Step 7, part 2: the pictures' data against a double loop with the learned w, and the nearest keys.
void check_pictures_by_hand(Tutorial& t, const Lesson& lesson) {
    note({.en = "\nThe data behind the pictures, checked against independent computations. The parametric curve "
                "and its weights, by a double loop over the 50 test points and the 50 keys with the learned w:",
          .zh = "\n图背后的数据，用独立的计算来检验。带参数的曲线及其权重，用学到的 w 对 50 个测试点和 50 "
                "个键做二重循环："});
    const nn::PoolingData& data = lesson.data;
    const int64_t n_test = lesson.n_test, n_train = lesson.n_train;
    const std::vector<double> xs = data.x_train.to_vector(), ys = data.y_train.to_vector();
    std::vector<double> curve(n_test);
    c::Tensor by_hand = c::zeros({n_test, n_train}, DType::float64);
    for (int64_t q = 0; q < n_test; ++q) {
        const double x = data.x_test.at({q});
        std::vector<double> score(n_train);
        double top = -1e300, total = 0;
        for (int64_t i = 0; i < n_train; ++i)
            top = std::max(top, score[i] = -0.5 * std::pow((x - xs[i]) * lesson.w_learned, 2));
        for (int64_t i = 0; i < n_train; ++i) total += score[i] = std::exp(score[i] - top);
        for (int64_t i = 0; i < n_train; ++i) {
            by_hand.set({q, i}, score[i] / total);
            curve[q] += score[i] / total * ys[i];
        }
    }
    t.check_close(lesson.y_learned, c::tensor(curve, {n_test}, DType::float64), 1e-4,
                  {.en = "the 'parametric' curve: all 50 points equal Σ softmax(-((x - x_i) w)²/2) y_i done by hand",
                   .zh = "“parametric”曲线：全部 50 个点都等于手算的 Σ softmax(-((x - x_i) w)²/2) y_i"});
    t.check_close(lesson.weights_learned, by_hand, 1e-5,
                  {.en = "its heatmap panel: all 50 × 50 weights equal the hand ones",
                   .zh = "它的热力图面板：全部 50 × 50 个权重都等于手算的值"});
    bool diagonal = true;
    for (const c::Tensor& w : {lesson.weights_plain, lesson.weights_learned})
        for (int64_t q = 0; q < n_test; ++q) {
            int64_t nearest = 0;
            for (int64_t i = 1; i < n_train; ++i)
                if (std::abs(data.x_test.at({q}) - xs[i]) < std::abs(data.x_test.at({q}) - xs[nearest])) nearest = i;
            diagonal = diagonal && c::argmax(w.select(0, q), 0).item() == static_cast<double>(nearest);
        }
    t.check(diagonal,
            {.en = "in both heatmap panels every row's largest weight sits on the training input nearest "
                   "to the query: the bright band is the diagonal of 'closest key'",
             .zh = "两个热力图面板中，每行最大的权重都落在离查询最近的训练输入上：亮带就是“最近的键”构成的对角线"});
    t.check_close(
        c::tensor(lesson.y_average.to_vector(), {n_test}, DType::float64),
        c::full({n_test}, std::accumulate(ys.begin(), ys.end(), 0.0) / static_cast<double>(n_train), DType::float64),
        1e-5,
        {.en = "the 'average pooling' line is flat at the mean of y_train",
         .zh = "“average pooling”那条线是水平的，高度为 y_train 的平均值"});
}

// seed 003 (003_8fde783e4908788c.txt) › 注意力汇聚 (d2l's plot_kernel_reg and show_heatmaps)
void pictures(Tutorial& t, const Lesson& lesson) {
    draw_pictures(t, lesson);
    check_pictures_by_hand(t, lesson);
}

// ---- the exercise (--exercise): tutorials/04_attention_pooling/exercise.cpp -----------------

// seed 003 (003_8fde783e4908788c.txt) › 带参数注意力汇聚, with a Laplace kernel
void exercise_laplace_kernel(Tutorial& t, const Lesson& lesson) {
    note(
        {.en = "Write exercise::laplace_pooling: the same pooling with the score -|x - x_i| w. The checks compare "
               "one query with a hand computation, test that a large w picks the nearest key's value, run "
               "gradcheck with respect to w, and fit the test grid better than average pooling.",
         .zh =
             "写出 exercise::laplace_pooling：同样的汇聚，但分数换成 -|x - x_i| w。检查会把一个查询与手算比较，检验很大"
             "的 w 会挑出最近的键的值，对 w 运行 gradcheck，并要求它在测试网格上比平均汇聚拟合得好。"});
    const c::Tensor xs = c::tensor({0.5, 1.0, 2.0, 3.5}, {4}, DType::float64);
    const c::Tensor yv = c::tensor({1.0, 3.0, -2.0, 4.0}, {4}, DType::float64);
    const Variable queries(c::tensor({1.2, 3.0}, {2}, DType::float64));
    const Variable keys(xs.unsqueeze(0).expand({2, 4}).contiguous()),
        values(yv.unsqueeze(0).expand({2, 4}).contiguous());
    const Variable w(c::scalar(1.5, DType::float64), true);
    const exercise::Pooled out = exercise::laplace_pooling(queries, keys, values, w);
    // by hand, query 1.2: scores -|1.2 - x_i| · 1.5
    double total = 0, value = 0;
    for (int64_t i = 0; i < 4; ++i) total += std::exp(-std::abs(1.2 - xs.at({i})) * 1.5);
    for (int64_t i = 0; i < 4; ++i) value += std::exp(-std::abs(1.2 - xs.at({i})) * 1.5) / total * yv.at({i});
    t.check(out.output.shape() == c::Shape{2} && out.weights.shape() == c::Shape{2, 4},
            {.en = "output (2) and weights (2, 4) for 2 queries of 4 keys",
             .zh = "2 个查询、4 个键：输出 (2)，权重 (2, 4)"});
    if (out.output.shape() == c::Shape{2})
        t.check_close(out.output.value().at({0}), value, 1e-12,
                      {.en = "f(1.2) equals the hand computation", .zh = "f(1.2) 等于手算结果"});
    t.check_close(c::sum(out.weights, {1}), c::ones({2}, DType::float64), 1e-12,
                  {.en = "each row of weights sums to 1", .zh = "权重的每一行之和为 1"});
    const exercise::Pooled sharp =
        exercise::laplace_pooling(queries, keys, values, Variable(c::scalar(200.0, DType::float64)));
    t.check_close(sharp.output.value(), c::tensor({3.0, 4.0}, {2}, DType::float64), 1e-6,
                  {.en = "w = 200: each query takes the value of its nearest key (1.0 → 3, 3.5 → 4)",
                   .zh = "w = 200：每个查询取最近的键的值（1.0 → 3，3.5 → 4）"});
    if (t.check(out.output.requires_grad(),
                {.en = "the output depends on w (it requires a gradient)", .zh = "输出依赖于 w（它需要梯度）"})) {
        const ag::GradcheckResult r = ag::gradcheck(
            [&](const std::vector<Variable>& in) {
                return exercise::laplace_pooling(queries, keys, values, in[0]).output;
            },
            {w});
        if (!r.passed) quote(r.report);
        t.check(r.passed, {.en = "gradcheck with respect to w: the kernel can be trained",
                           .zh = "对 w 做 gradcheck：这个核可以训练"});
    }
    ag::NoGradGuard no_grad;
    const nn::PoolingData& data = lesson.data;
    const Variable test_keys(repeat_rows(data.x_train, lesson.n_test)),
        test_values(repeat_rows(data.y_train, lesson.n_test));
    const exercise::Pooled fit =
        exercise::laplace_pooling(lesson.x_test, test_keys, test_values, Variable(c::scalar(2.0)));
    t.check(mse(fit.output.value(), data.y_truth) <
                mse(nn::average_pooling(lesson.x_test, lesson.y_train).value(), data.y_truth),
            {.en = "with w = 2 it fits the test grid better than average pooling",
             .zh = "w = 2 时它在测试网格上比平均汇聚拟合得好"});
}

}  // namespace

int main(int argc, char** argv) {
    Tutorial t(
        argc, argv,
        {.title = {.en = "tformer tutorial 04 · Attention pooling (Nadaraya–Watson regression)",
                   .zh = "tformer 教程 04 · 注意力汇聚（Nadaraya–Watson 核回归）"},
         .follows = {.en = "seed 003 查询、键和值; 注意力汇聚: 平均汇聚, 非参数注意力汇聚, 带参数注意力汇聚",
                     .zh = "种子文档 003 查询、键和值；注意力汇聚：平均汇聚、非参数注意力汇聚、带参数注意力汇聚"},
         .exercise = {.en = "pool with a Laplace kernel softmax(-|x - x_i| w) instead of the Gaussian "
                            "(tutorials/04_attention_pooling/exercise.cpp)",
                      .zh = "用拉普拉斯核 softmax(-|x - x_i| w) "
                            "代替高斯核来汇聚（tutorials/04_attention_pooling/exercise.cpp）"}});
    Lesson lesson;
    t.step({.en = "1. Queries, keys and values: seed 003's search engine (查询、键和值)",
            .zh = "1. 查询、键和值：种子文档 003 的搜索引擎"},
           [&] { queries_keys_values(t); });
    t.step({.en = "2. The data: 50 noisy samples of f(x) = 2 sin(x) + x^0.8",
            .zh = "2. 数据：f(x) = 2 sin(x) + x^0.8 的 50 个带噪声样本"},
           [&] { the_data(t, lesson); });
    t.step({.en = "3. Average pooling (平均汇聚): f(x) = 1/n Σ y_i", .zh = "3. 平均汇聚：f(x) = 1/n Σ y_i"},
           [&] { average_pooling(t, lesson); });
    t.step({.en = "4. Non-parametric attention pooling (非参数注意力汇聚)", .zh = "4. 非参数注意力汇聚"},
           [&] { nonparametric_pooling(t, lesson); });
    t.step(
        {.en = "5. Parametric attention pooling (带参数注意力汇聚): learning w", .zh = "5. 带参数注意力汇聚：学习 w"},
        [&] { parametric_pooling(t, lesson); });
    t.step({.en = "6. Why a training input must not be its own key", .zh = "6. 为什么训练输入不能是它自己的键"},
           [&] { not_its_own_key(t, lesson); });
    t.step({.en = "7. Pictures: the fitted curves and the attention weights", .zh = "7. 图：拟合曲线与注意力权重"},
           [&] { pictures(t, lesson); });
    t.exercise(
        {.en = "Exercise. A Laplace kernel: softmax(-|x - x_i| w)", .zh = "练习. 拉普拉斯核：softmax(-|x - x_i| w)"},
        [&] { exercise_laplace_kernel(t, lesson); });
    return t.finish();
}
