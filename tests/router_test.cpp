// The MoE router (route in src/model/layers.h) against a brute-force reference of the
// reference's Gate.forward written here in double (docs/REFERENCE.md section 4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "model/config.h"
#include "model/layers.h"

namespace dsinfer::router_test {
namespace {

ModelConfig v2_lite_router() {  // 64 experts, top 6, softmax, no groups
  ModelConfig c;
  c.n_routed_experts = 64;
  c.n_activated_experts = 6;
  c.n_expert_groups = 1;
  c.n_limited_groups = 1;
  c.score_func = ScoreFunc::kSoftmax;
  c.route_scale = 1.0;
  return c;
}

ModelConfig v2_router() {  // 160 experts in 8 groups, keep 3, top 6, softmax, scale 16
  ModelConfig c;
  c.n_routed_experts = 160;
  c.n_activated_experts = 6;
  c.n_expert_groups = 8;
  c.n_limited_groups = 3;
  c.score_func = ScoreFunc::kSoftmax;
  c.route_scale = 16.0;
  return c;
}

ModelConfig v3_router() {  // 256 experts in 8 groups, keep 4, top 8, sigmoid, scale 2.5
  ModelConfig c;
  c.n_routed_experts = 256;
  c.n_activated_experts = 8;
  c.n_expert_groups = 8;
  c.n_limited_groups = 4;
  c.score_func = ScoreFunc::kSigmoid;
  c.route_scale = 2.5;
  return c;
}

struct Routing {
  std::map<int, double> weight_of;  // expert -> weight
  double margin = 1e9;              // smallest gap at a selection boundary (near-ties are skipped)
};

// Brute force: scores, biased selection scores, each group examined on its own, groups ranked,
// the candidates of the kept groups ranked, original scores as weights.
Routing route_reference(const ModelConfig& c, const std::vector<float>& logits,
                        const std::vector<float>* bias) {
  const int E = c.n_routed_experts, G = c.n_expert_groups, per = E / G, k = c.n_activated_experts;
  std::vector<double> score(E), select(E);
  if (c.score_func == ScoreFunc::kSoftmax) {
    double m = -1e300, sum = 0;
    for (float v : logits) m = std::max(m, double(v));
    for (int e = 0; e < E; ++e) sum += score[e] = std::exp(double(logits[e]) - m);
    for (double& s : score) s /= sum;
  } else {
    for (int e = 0; e < E; ++e) score[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
  }
  for (int e = 0; e < E; ++e) select[e] = score[e] + (bias ? double((*bias)[e]) : 0.0);

  Routing r;
  std::vector<int> candidates;
  if (G > 1) {
    std::vector<std::pair<double, int>> groups;  // (group score, group)
    for (int g = 0; g < G; ++g) {
      std::vector<double> members(select.begin() + g * per, select.begin() + (g + 1) * per);
      std::sort(members.rbegin(), members.rend());
      const double gs = bias ? members[0] + members[1] : members[0];
      groups.push_back({gs, g});
    }
    std::sort(groups.begin(), groups.end(), [](auto& a, auto& b) { return a.first > b.first; });
    if (c.n_limited_groups < G)
      r.margin = std::min(r.margin,
                          groups[c.n_limited_groups - 1].first - groups[c.n_limited_groups].first);
    for (int j = 0; j < c.n_limited_groups; ++j)
      for (int e = groups[j].second * per; e < (groups[j].second + 1) * per; ++e)
        candidates.push_back(e);
  } else {
    candidates.resize(E);
    std::iota(candidates.begin(), candidates.end(), 0);
  }
  std::sort(candidates.begin(), candidates.end(),
            [&](int a, int b) { return select[a] > select[b]; });
  if (static_cast<int>(candidates.size()) > k)
    r.margin = std::min(r.margin, select[candidates[k - 1]] - select[candidates[k]]);
  double sum = 0;
  for (int j = 0; j < k; ++j) sum += score[candidates[j]];
  for (int j = 0; j < k; ++j) {
    double w = score[candidates[j]];
    if (c.score_func == ScoreFunc::kSigmoid) w /= sum;
    r.weight_of[candidates[j]] = w * c.route_scale;
  }
  return r;
}

std::map<int, double> route_actual(const ModelConfig& c, const std::vector<float>& logits,
                                   const std::vector<float>* bias) {
  const int k = c.n_activated_experts;
  std::vector<int> experts(k, -1);
  std::vector<float> weights(k, std::nanf(""));
  route(c, logits.data(), bias ? bias->data() : nullptr, experts.data(), weights.data());
  std::map<int, double> out;
  for (int j = 0; j < k; ++j) {
    EXPECT_GE(experts[j], 0);
    EXPECT_LT(experts[j], c.n_routed_experts);
    EXPECT_EQ(out.count(experts[j]), 0u) << "expert " << experts[j] << " chosen twice";
    out[experts[j]] = weights[j];
  }
  return out;
}

std::set<int> keys(const std::map<int, double>& m) {
  std::set<int> s;
  for (auto& [e, w] : m) s.insert(e);
  return s;
}

void expect_same_routing(const std::map<int, double>& got, const std::map<int, double>& want,
                         const std::string& what) {
  ASSERT_EQ(keys(got), keys(want)) << what;
  for (auto& [e, w] : want)
    EXPECT_NEAR(got.at(e), w, 1e-5 * std::abs(w) + 1e-9) << what << " expert " << e;
}

// Compares on `trials` random logit vectors (and biases); returns how often the brute force with
// the bias / the group limit gave another expert set than without (to show the case matters).
struct Coverage {
  int bias_mattered = 0, groups_mattered = 0, skipped = 0;
};

Coverage compare_random(const ModelConfig& c, bool with_bias, uint32_t seed, int trials = 1000) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> logit(0.0f, 2.0f);
  std::uniform_real_distribution<float> bias_dist(-0.25f, 0.25f);
  ModelConfig no_groups = c;
  no_groups.n_expert_groups = 1;
  no_groups.n_limited_groups = 1;
  Coverage cov;
  for (int t = 0; t < trials; ++t) {
    std::vector<float> logits(c.n_routed_experts), bias(c.n_routed_experts);
    for (float& v : logits) v = logit(rng);
    for (float& v : bias) v = bias_dist(rng);
    const std::vector<float>* b = with_bias ? &bias : nullptr;
    const Routing ref = route_reference(c, logits, b);
    if (ref.margin < 1e-6) {  // a near-tie that fp32 may break either way
      ++cov.skipped;
      continue;
    }
    const std::map<int, double> got = route_actual(c, logits, b);
    expect_same_routing(got, ref.weight_of, "trial " + std::to_string(t));
    if (::testing::Test::HasFailure()) return cov;
    if (with_bias && keys(route_reference(c, logits, nullptr).weight_of) != keys(ref.weight_of))
      ++cov.bias_mattered;
    if (c.n_expert_groups > 1 &&
        keys(route_reference(no_groups, logits, b).weight_of) != keys(ref.weight_of))
      ++cov.groups_mattered;
    // sigmoid weights sum to route_scale; softmax weights are not renormalised
    double sum = 0;
    for (auto& [e, w] : got) sum += w;
    if (c.score_func == ScoreFunc::kSigmoid)
      EXPECT_NEAR(sum, c.route_scale, 1e-5 * c.route_scale);
    else
      EXPECT_LT(sum, c.route_scale);
  }
  EXPECT_LT(cov.skipped, 10);
  return cov;
}

TEST(Router, SoftmaxWithoutGroupsV2Lite) {
  compare_random(v2_lite_router(), false, 11);
  ModelConfig scaled = v2_lite_router();
  scaled.route_scale = 1.5;  // the scale multiplies the softmax probabilities
  compare_random(scaled, false, 12);
}

TEST(Router, SoftmaxWithGroupsV2) {
  const Coverage cov = compare_random(v2_router(), false, 21);
  EXPECT_GT(cov.groups_mattered, 100);  // the group limit changes the choice often
}

TEST(Router, SigmoidBiasGroupsV3) {
  const Coverage cov = compare_random(v3_router(), true, 31);
  EXPECT_GT(cov.bias_mattered, 100);
  EXPECT_GT(cov.groups_mattered, 100);
}

TEST(Router, SigmoidGroupsWithoutBias) {
  // the reference's Gate has no bias unless dim == 7168: sigmoid scores, group score = max
  const Coverage cov = compare_random(v3_router(), false, 41);
  EXPECT_GT(cov.groups_mattered, 50);
}

TEST(Router, SigmoidWithoutGroupsWithBias) {
  ModelConfig c = v3_router();
  c.n_expert_groups = 1;
  c.n_limited_groups = 1;
  const Coverage cov = compare_random(c, true, 51);
  EXPECT_GT(cov.bias_mattered, 100);
}

float logit_of(double p) { return static_cast<float>(std::log(p / (1.0 - p))); }
double sigmoid(float x) { return 1.0 / (1.0 + std::exp(-double(x))); }

TEST(Router, BiasChangesChoiceButNotWeights) {
  ModelConfig c;
  c.n_routed_experts = 8;
  c.n_activated_experts = 2;
  c.n_expert_groups = 1;
  c.n_limited_groups = 1;
  c.score_func = ScoreFunc::kSigmoid;
  c.route_scale = 2.5;
  std::vector<float> logits = {logit_of(0.9), logit_of(0.8), logit_of(0.7), logit_of(0.1),
                               logit_of(0.1), logit_of(0.2), logit_of(0.1), logit_of(0.3)};
  std::vector<float> zero(8, 0.0f);
  const double s0 = sigmoid(logits[0]), s1 = sigmoid(logits[1]), s2 = sigmoid(logits[2]);
  expect_same_routing(route_actual(c, logits, &zero),
                      {{0, 2.5 * s0 / (s0 + s1)}, {1, 2.5 * s1 / (s0 + s1)}}, "no bias");
  expect_same_routing(route_actual(c, logits, nullptr),
                      {{0, 2.5 * s0 / (s0 + s1)}, {1, 2.5 * s1 / (s0 + s1)}}, "null bias");
  // +0.5 on expert 2 lifts it above expert 1 (1.2 vs 0.8): the weights stay the plain sigmoid
  // scores 0.9 and 0.7, normalised
  std::vector<float> bias(8, 0.0f);
  bias[2] = 0.5f;
  const std::map<int, double> got = route_actual(c, logits, &bias);
  expect_same_routing(got, {{0, 2.5 * s0 / (s0 + s2)}, {2, 2.5 * s2 / (s0 + s2)}}, "bias on 2");
  EXPECT_NEAR(got.at(0), 2.5 * 0.9 / 1.6, 1e-5);
  EXPECT_NEAR(got.at(2), 2.5 * 0.7 / 1.6, 1e-5);
  // a big negative bias on the best expert excludes it
  std::vector<float> minus(8, 0.0f);
  minus[0] = -1.0f;
  expect_same_routing(route_actual(c, logits, &minus),
                      {{1, 2.5 * s1 / (s1 + s2)}, {2, 2.5 * s2 / (s1 + s2)}}, "minus 0");
  // the same bias on every expert changes nothing
  std::vector<float> shift(8, 0.37f);
  expect_same_routing(route_actual(c, logits, &shift),
                      {{0, 2.5 * s0 / (s0 + s1)}, {1, 2.5 * s1 / (s0 + s1)}}, "shift");
}

TEST(Router, GroupWithBestExpertDroppedWhenItsTopTwoSumIsLow) {
  ModelConfig c;
  c.n_routed_experts = 16;
  c.n_activated_experts = 2;
  c.n_expert_groups = 4;
  c.n_limited_groups = 2;
  c.score_func = ScoreFunc::kSigmoid;
  c.route_scale = 2.5;
  // group 0 holds the single best expert (0.99) but its top-2 sum is 1.00; groups 1 (0.62 + 0.58)
  // and 2 (0.55 + 0.52) win
  const double p[16] = {0.99, 0.01, 0.01, 0.01, 0.62, 0.58, 0.02, 0.01,
                        0.03, 0.55, 0.01, 0.52, 0.2,  0.3,  0.1,  0.05};
  std::vector<float> logits(16);
  for (int e = 0; e < 16; ++e) logits[e] = logit_of(p[e]);
  std::vector<float> zero(16, 0.0f);
  const double s4 = sigmoid(logits[4]), s5 = sigmoid(logits[5]), s0 = sigmoid(logits[0]);
  const std::map<int, double> got = route_actual(c, logits, &zero);
  expect_same_routing(got, {{4, 2.5 * s4 / (s4 + s5)}, {5, 2.5 * s5 / (s4 + s5)}}, "top-2 sum");
  expect_same_routing(got, route_reference(c, logits, &zero).weight_of, "brute force");
  // without a bias the group score is the maximum: group 0 (0.99) and group 1 (0.62) are kept
  expect_same_routing(route_actual(c, logits, nullptr),
                      {{0, 2.5 * s0 / (s0 + s4)}, {4, 2.5 * s4 / (s0 + s4)}}, "max, no bias");
  // keeping only one group: group 1 alone
  c.n_limited_groups = 1;
  expect_same_routing(route_actual(c, logits, &zero),
                      {{4, 2.5 * s4 / (s4 + s5)}, {5, 2.5 * s5 / (s4 + s5)}}, "one group");
  // a bias on group 2's second expert makes group 2 the best (0.55 + 0.52 + 0.2)
  std::vector<float> bias(16, 0.0f);
  bias[11] = 0.2f;
  const double s9 = sigmoid(logits[9]), s11 = sigmoid(logits[11]);
  expect_same_routing(route_actual(c, logits, &bias),
                      {{9, 2.5 * s9 / (s9 + s11)}, {11, 2.5 * s11 / (s9 + s11)}},
                      "bias lifts group 2");
}

TEST(Router, SoftmaxGroupScoreIsTheMaximum) {
  ModelConfig c;
  c.n_routed_experts = 8;
  c.n_activated_experts = 2;
  c.n_expert_groups = 4;
  c.n_limited_groups = 1;
  c.score_func = ScoreFunc::kSoftmax;
  c.route_scale = 16.0;
  // group 0 = {5, -5} has the best expert; group 1 = {4.5, 4.5} has the larger sum
  const std::vector<float> logits = {5.0f, -5.0f, 4.5f, 4.5f, 0.0f, 0.0f, 1.0f, -1.0f};
  std::vector<double> p(8);
  double sum = 0;
  for (int e = 0; e < 8; ++e) sum += p[e] = std::exp(double(logits[e]));
  for (double& v : p) v /= sum;
  expect_same_routing(route_actual(c, logits, nullptr), {{0, 16 * p[0]}, {1, 16 * p[1]}},
                      "max group");
  // two groups kept: the top two experts over groups 0 and 1, not renormalised
  c.n_limited_groups = 2;
  expect_same_routing(route_actual(c, logits, nullptr), {{0, 16 * p[0]}, {2, 16 * p[2]}},
                      "two groups");
}

TEST(Router, SoftmaxWeightsAreProbabilitiesNotRenormalised) {
  ModelConfig c = v2_lite_router();
  std::vector<float> logits(64, 0.0f);  // uniform: every probability 1/64
  logits[10] = 1.0f;
  const std::map<int, double> got = route_actual(c, logits, nullptr);
  const double z = 63.0 + std::exp(1.0);
  ASSERT_TRUE(got.count(10));
  EXPECT_NEAR(got.at(10), std::exp(1.0) / z, 1e-6);
  for (auto& [e, w] : got) {
    if (e != 10) {
      EXPECT_NEAR(w, 1.0 / z, 1e-6) << e;
    }
  }
}

}  // namespace
}  // namespace dsinfer::router_test
