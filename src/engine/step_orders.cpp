#include "engine/step_orders.h"

#include <cstring>
#include <type_traits>

#include "core/error.h"

namespace dsinfer {

namespace {

class Writer {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    put<uint64_t>(v.size());
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string out;
};

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    T v;
    take(&v, sizeof(T));
    return v;
  }
  template <class T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    check(n <= (bytes_.size() - at_) / sizeof(T), "step orders from rank 0 are cut short");
    std::vector<T> v(n);
    take(v.data(), n * sizeof(T));
    return v;
  }
  std::string rest() { return bytes_.substr(at_); }
  bool done() const { return at_ == bytes_.size(); }

 private:
  void take(void* dst, size_t n) {
    check(n <= bytes_.size() - at_, "step orders from rank 0 are cut short");
    if (n > 0)
      std::memcpy(dst, bytes_.data() + at_, n);  // (memcpy of nothing to a null vector is UB)
    at_ += n;
  }
  const std::string& bytes_;
  size_t at_ = 0;
};

}  // namespace

std::string encode_orders(const StepOrders& orders) {
  Writer w;
  w.put(orders.kind);
  if (orders.kind == StepOrders::Kind::kAbort) {
    w.out.append(orders.reason);
    return w.out;
  }
  if (orders.kind != StepOrders::Kind::kStep) return w.out;
  w.put<uint64_t>(orders.submissions.size());
  for (const Submission& s : orders.submissions) {
    const SamplingParams& p = s.params;
    w.put(s.id);
    w.put_vector(s.prompt);
    w.put(p.temperature);
    w.put(p.top_p);
    w.put<int32_t>(p.top_k);
    w.put<int32_t>(p.max_new_tokens);
    w.put_vector(p.stop_ids);
    w.put(p.seed);
    w.put<int32_t>(p.choice);
    w.put<uint8_t>(p.prompt_logits);
    w.put<uint8_t>(p.token_logits);
    w.put(p.repetition_penalty);
    w.put(p.frequency_penalty);
    w.put(p.presence_penalty);
    std::vector<int32_t> bias_ids;
    std::vector<float> biases;
    for (const auto& [id, bias] : p.logit_bias) {
      bias_ids.push_back(id);
      biases.push_back(bias);
    }
    w.put_vector(bias_ids);
    w.put_vector(biases);
    w.put<int32_t>(p.min_tokens);
    w.put(p.min_p);
    w.put(p.grammar.kind);
    w.put<uint8_t>(p.grammar.strict);
    w.put<uint8_t>(p.grammar.after_reasoning);
    w.put_vector(std::vector<char>(p.grammar.text.begin(), p.grammar.text.end()));
  }
  w.put_vector(orders.cancels);
  w.put<uint8_t>(orders.draft);
  return w.out;
}

StepOrders decode_orders(const std::string& bytes) {
  Reader r(bytes);
  StepOrders orders;
  orders.kind = r.get<StepOrders::Kind>();
  switch (orders.kind) {
    case StepOrders::Kind::kAbort:
      orders.reason = r.rest();
      return orders;
    case StepOrders::Kind::kPause:
    case StepOrders::Kind::kStop:
      break;
    case StepOrders::Kind::kStep: {
      const uint64_t n = r.get<uint64_t>();
      check(n <= bytes.size(), "step orders from rank 0 are cut short");
      for (uint64_t i = 0; i < n; ++i) {
        Submission s;
        SamplingParams& p = s.params;
        s.id = r.get<RequestId>();
        s.prompt = r.get_vector<int32_t>();
        p.temperature = r.get<float>();
        p.top_p = r.get<float>();
        p.top_k = r.get<int32_t>();
        p.max_new_tokens = r.get<int32_t>();
        p.stop_ids = r.get_vector<int32_t>();
        p.seed = r.get<uint64_t>();
        p.choice = r.get<int32_t>();
        p.prompt_logits = r.get<uint8_t>() != 0;
        p.token_logits = r.get<uint8_t>() != 0;
        p.repetition_penalty = r.get<float>();
        p.frequency_penalty = r.get<float>();
        p.presence_penalty = r.get<float>();
        const std::vector<int32_t> bias_ids = r.get_vector<int32_t>();
        const std::vector<float> biases = r.get_vector<float>();
        check(bias_ids.size() == biases.size(), "step orders from rank 0: logit_bias is torn");
        for (size_t b = 0; b < bias_ids.size(); ++b)
          p.logit_bias.emplace_back(bias_ids[b], biases[b]);
        p.min_tokens = r.get<int32_t>();
        p.min_p = r.get<float>();
        p.grammar.kind = r.get<OutputGrammar::Kind>();
        check(p.grammar.kind <= OutputGrammar::Kind::kStructuralTag,
              "step orders from rank 0 name an unknown grammar kind");
        p.grammar.strict = r.get<uint8_t>() != 0;
        p.grammar.after_reasoning = r.get<uint8_t>() != 0;
        const std::vector<char> text = r.get_vector<char>();
        p.grammar.text.assign(text.begin(), text.end());
        orders.submissions.push_back(std::move(s));
      }
      orders.cancels = r.get_vector<RequestId>();
      orders.draft = r.get<uint8_t>() != 0;
      break;
    }
    default:
      fail("step orders from rank 0 have an unknown kind ", static_cast<int>(orders.kind));
  }
  check(r.done(), "step orders from rank 0 carry ", bytes.size(), " bytes, more than they hold");
  return orders;
}

}  // namespace dsinfer
