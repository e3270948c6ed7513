// PersistentMap: an immutable ordered map with order statistics (rank of a key, key at a rank).
// Insert and Erase return a new map that shares all but O(log n) nodes with the old one (a treap
// with path copying), and the old map stays valid and unchanged for as long as anyone holds it.
// So a writer can build the next version while readers keep consistent snapshots, without a lock
// held across their reads and without copying a large map per change.
//
// Treap priorities are a hash of the key, so the shape depends only on the set of keys; expected
// depth is about 2 ln n (28 at a million keys).
//
// Thread-safety: a map is immutable. Copies may be made, read and released on any thread (nodes
// are reference-counted atomically); building new versions from one map on several threads is
// safe too.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace zipg {

template <typename Key, typename Value, typename Less = std::less<Key>,
          typename Hash = std::hash<Key>>
class PersistentMap {
 public:
  PersistentMap() = default;
  PersistentMap(const PersistentMap& other) : root_(Ref(other.root_)) {}
  PersistentMap(PersistentMap&& other) noexcept : root_(other.root_) { other.root_ = nullptr; }
  PersistentMap& operator=(const PersistentMap& other) {
    if (this != &other) {
      const Node* old = root_;
      root_ = Ref(other.root_);
      Unref(old);
    }
    return *this;
  }
  PersistentMap& operator=(PersistentMap&& other) noexcept {
    if (this != &other) {
      Unref(root_);
      root_ = other.root_;
      other.root_ = nullptr;
    }
    return *this;
  }
  ~PersistentMap() { Unref(root_); }

  size_t size() const { return Size(root_); }
  bool empty() const { return root_ == nullptr; }
  // Bytes one entry takes in memory (its node as malloc hands it out: 8 bytes of header, 16-byte
  // granules), for accounting.
  static constexpr size_t EntryBytes() { return (sizeof(Node) + 8 + 15) / 16 * 16; }

  // A map with `key` mapped to `value` (replacing any earlier value).
  [[nodiscard]] PersistentMap Insert(const Key& key, Value value) const {
    return PersistentMap(Insert(root_, key, std::move(value), Priority(key)));
  }
  // A map without `key` (the same map if it is absent).
  [[nodiscard]] PersistentMap Erase(const Key& key) const {
    if (Find(key) == nullptr) return *this;
    return PersistentMap(Erase(root_, key));
  }

  // The value of `key`, or null; valid as long as this map (or a copy sharing it) lives.
  const Value* Find(const Key& key) const {
    for (const Node* t = root_; t != nullptr;) {
      if (Less()(key, t->key)) {
        t = t->left;
      } else if (Less()(t->key, key)) {
        t = t->right;
      } else {
        return &t->value;
      }
    }
    return nullptr;
  }
  // How many keys are less than `key`.
  size_t Rank(const Key& key) const {
    size_t rank = 0;
    for (const Node* t = root_; t != nullptr;) {
      if (Less()(t->key, key)) {
        rank += Size(t->left) + 1;
        t = t->right;
      } else {
        t = t->left;
      }
    }
    return rank;
  }
  // The entry of rank i (0 <= i < size()): the i-th smallest key and its value.
  std::pair<const Key&, const Value&> At(size_t i) const {
    const Node* t = root_;
    while (true) {
      const size_t left = Size(t->left);
      if (i < left) {
        t = t->left;
      } else if (i == left) {
        return {t->key, t->value};
      } else {
        i -= left + 1;
        t = t->right;
      }
    }
  }
  // Calls f(key, value) for the entries of ranks [first, last), in order; stops early if f
  // returns false.
  template <typename F>
  void Visit(size_t first, size_t last, F f) const {
    if (last > size()) last = size();
    if (first >= last) return;
    // Descend to rank `first`, keeping the ancestors whose key comes later.
    std::vector<const Node*> stack;
    const Node* t = root_;
    size_t i = first;
    while (t != nullptr) {
      const size_t left = Size(t->left);
      if (i < left) {
        stack.push_back(t);
        t = t->left;
      } else if (i == left) {
        stack.push_back(t);
        break;
      } else {
        i -= left + 1;
        t = t->right;
      }
    }
    for (size_t n = last - first; n > 0; --n) {
      const Node* node = stack.back();
      stack.pop_back();
      if (!f(node->key, node->value)) return;
      for (const Node* c = node->right; c != nullptr; c = c->left) stack.push_back(c);
    }
  }

 private:
  struct Node {
    Key key;
    Value value;
    uint32_t priority;
    uint32_t size;
    mutable std::atomic<uint32_t> refs{1};
    const Node* left;
    const Node* right;
  };

  explicit PersistentMap(const Node* root) : root_(root) {}

  static size_t Size(const Node* t) { return t == nullptr ? 0 : t->size; }
  static uint32_t Priority(const Key& key) {
    uint64_t x = static_cast<uint64_t>(Hash()(key)) + 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return static_cast<uint32_t>(x ^ (x >> 31));
  }
  static const Node* Ref(const Node* t) {
    if (t != nullptr) t->refs.fetch_add(1, std::memory_order_relaxed);
    return t;
  }
  static void Unref(const Node* t) {
    while (t != nullptr && t->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      const Node* right = t->right;
      Unref(t->left);
      delete t;
      t = right;  // the right spine iteratively: no deep recursion on a skewed subtree
    }
  }
  // A new node owning `left` and `right` (their references move in).
  static const Node* Make(const Key& key, Value value, uint32_t priority, const Node* left,
                          const Node* right) {
    return new Node{key, std::move(value), priority,
                    static_cast<uint32_t>(Size(left) + Size(right) + 1), {1}, left, right};
  }
  // Copy of `t` with other children (their references move in).
  static const Node* With(const Node* t, const Node* left, const Node* right) {
    return Make(t->key, t->value, t->priority, left, right);
  }

  // Splits `t` (borrowed) into new trees of the keys less than `key` and greater than it; an
  // equal key is dropped.
  static void Split(const Node* t, const Key& key, const Node** less, const Node** greater) {
    if (t == nullptr) {
      *less = *greater = nullptr;
    } else if (Less()(t->key, key)) {
      const Node* right_less;
      Split(t->right, key, &right_less, greater);
      *less = With(t, Ref(t->left), right_less);
    } else if (Less()(key, t->key)) {
      const Node* left_greater;
      Split(t->left, key, less, &left_greater);
      *greater = With(t, left_greater, Ref(t->right));
    } else {
      *less = Ref(t->left);
      *greater = Ref(t->right);
    }
  }
  // A new tree of `a` then `b` (borrowed; every key of a is less than every key of b).
  static const Node* Join(const Node* a, const Node* b) {
    if (a == nullptr) return Ref(b);
    if (b == nullptr) return Ref(a);
    if (a->priority > b->priority) return With(a, Ref(a->left), Join(a->right, b));
    return With(b, Join(a, b->left), Ref(b->right));
  }
  static const Node* Insert(const Node* t, const Key& key, Value value, uint32_t priority) {
    if (t == nullptr || priority > t->priority) {
      const Node *less, *greater;
      Split(t, key, &less, &greater);
      return Make(key, std::move(value), priority, less, greater);
    }
    if (Less()(key, t->key)) {
      return With(t, Insert(t->left, key, std::move(value), priority), Ref(t->right));
    }
    if (Less()(t->key, key)) {
      return With(t, Ref(t->left), Insert(t->right, key, std::move(value), priority));
    }
    return Make(t->key, std::move(value), t->priority, Ref(t->left), Ref(t->right));
  }
  // `key` must be present in `t`.
  static const Node* Erase(const Node* t, const Key& key) {
    if (Less()(key, t->key)) return With(t, Erase(t->left, key), Ref(t->right));
    if (Less()(t->key, key)) return With(t, Ref(t->left), Erase(t->right, key));
    return Join(t->left, t->right);
  }

  const Node* root_ = nullptr;
};

}  // namespace zipg
