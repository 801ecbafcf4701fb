// The prefix index over the KV cache's blocks (as vLLM's automatic prefix caching and SGLang's
// radix tree): a tree whose nodes are blocks of token ids, each node's block holding the cache
// entries of its tokens after the tokens of every node above it. A full node is a whole block
// (kKVBlock tokens), found from its parent by its tokens; a tail is the partial last block of a
// finished sequence (a conversation's last turn), a leaf found by scanning its parent's children.
//
// A new request maps the blocks of its longest cached prefix (KVCache::create_sharing): every
// matching full block shared, and the matching start of the next block (a tail, or a full block
// it matches only in part) copied. Sequences register their full blocks as soon as their
// positions are settled, so concurrent requests with one system prompt share it, and their tail
// when they finish; an identical block already indexed takes the place of the sequence's own
// (same entries: the kernels are batch invariant), so a prefix is stored once. No request ever
// truncates or changes another's blocks.
//
// The index holds a reference on each block it records; a block only it holds is evictable,
// least recently used first (a lookup or a finished sequence uses its whole path; a node is never
// used more recently than its parent, so leaves go first and no node is left unreachable).
//
// With the MTP module (engine/engine.h), each node also records the MTP cache's block for the same
// positions. An MTP entry at position p took token p + 1 as well: a node's MTP entries are valid
// for a prompt only where the token after each of them matches too (`next_token` after the
// node's last one).
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/kv_cache.h"

namespace dsinfer {

using PrefixNodeId = int64_t;
inline constexpr PrefixNodeId kPrefixRoot = -1;
inline constexpr PrefixNodeId kNoPrefixNode = -2;

class PrefixCache {
 public:
  // mtp_cache: the MTP module's cache, whose sequences mirror the main cache's (or null).
  PrefixCache(KVCache& cache, KVCache* mtp_cache);
  ~PrefixCache();  // gives back its blocks
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest cached prefix of tokens[0, limit) (limit < tokens.size(): with MTP the token
  // after the last one is read).
  struct Match {
    std::vector<PrefixNodeId> path;              // the full nodes matched, in order
    std::vector<BlockId> blocks, mtp_blocks;     // their blocks (mtp_blocks with an MTP cache)
    BlockId copy_from = -1, mtp_copy_from = -1;  // the block the next positions are copied from
    int64_t copy_positions = 0;
    int64_t positions() const {
      return static_cast<int64_t>(blocks.size()) * kKVBlock + copy_positions;
    }
  };
  // Marks the path used (it becomes the most recently used).
  Match lookup(std::span<const int32_t> tokens, int64_t limit);

  // Registers full block `index` of a sequence (tokens: its kKVBlock tokens) under `parent`
  // (the node of block index - 1, kPrefixRoot for block 0); returns its node. When the node
  // exists already, the sequence's block is replaced by the indexed one.
  PrefixNodeId add_block(PrefixNodeId parent, std::span<const int32_t> tokens, SeqId seq,
                         int64_t index);
  // Records the MTP entries of a full node, from block `index` of the MTP sequence `mtp_seq`,
  // valid for prompts whose token after the block is `next_token` (when the node has none yet,
  // else the MTP sequence takes the node's block when its next token agrees).
  void add_mtp_block(PrefixNodeId node, SeqId mtp_seq, int64_t index, int32_t next_token);
  // A finished sequence's partial last block: `tokens` (fewer than kKVBlock) at block `index` of
  // seq, under `parent`; mtp_positions of them valid in the MTP sequence's block, with
  // `next_token` the token after the last (-1: unknown). Tails the new one extends are dropped;
  // one that an indexed node already covers is not added.
  void add_tail(PrefixNodeId parent, std::span<const int32_t> tokens, SeqId seq, int64_t index,
                SeqId mtp_seq, int64_t mtp_positions, int32_t next_token);
  // Marks a path used (a sequence that finished).
  void touch(std::span<const PrefixNodeId> path);

  // Evicts blocks only the index holds, least recently used first, until `blocks` blocks are free
  // in the cache (and the MTP cache); whether they are.
  bool make_room(int64_t blocks);
  // Forgets everything (its blocks go back to the cache, unless sequences hold them).
  void clear();

  int64_t nodes() const { return static_cast<int64_t>(nodes_.size()); }
  int64_t evictions() const { return evictions_; }

 private:
  struct Node {
    PrefixNodeId parent = kPrefixRoot;
    std::vector<int32_t> tokens;  // kKVBlock for a full node, fewer for a tail
    BlockId block = -1, mtp_block = -1;
    int64_t mtp_positions = 0;  // leading positions whose MTP entries are recorded
    int32_t next_token = -1;    // the token after the node's last one, where the MTP saw it
    int64_t depth = 0;
    uint64_t used = 0;  // the tick of its last use
    std::vector<PrefixNodeId> children;
    bool full() const { return static_cast<int64_t>(tokens.size()) == kKVBlock; }
  };
  // Eviction order: least recently used first, deeper first among equals.
  struct Order {
    uint64_t used;
    int64_t neg_depth;
    PrefixNodeId id;
    bool operator<(const Order& o) const {
      return used != o.used             ? used < o.used
             : neg_depth != o.neg_depth ? neg_depth < o.neg_depth
                                        : id < o.id;
    }
  };
  static uint64_t key(PrefixNodeId parent, std::span<const int32_t> tokens);
  PrefixNodeId find_full(PrefixNodeId parent, std::span<const int32_t> tokens) const;
  const std::vector<PrefixNodeId>& children(PrefixNodeId parent) const;
  std::vector<PrefixNodeId>& children(PrefixNodeId parent);
  // How many of the node's leading positions a prompt can take whose tokens from the node's first
  // position on are rest[0, rest.size() - 1) with rest.back() the one after them: the common
  // prefix, and with MTP only positions whose MTP entries are valid.
  int64_t usable(const Node& n, std::span<const int32_t> rest) const;
  void set_used(PrefixNodeId id, uint64_t used);
  PrefixNodeId insert(Node node);
  void erase(PrefixNodeId id);
  bool evictable(const Node& n) const;

  KVCache& cache_;
  KVCache* mtp_cache_;
  std::unordered_map<PrefixNodeId, Node> nodes_;
  std::vector<PrefixNodeId> root_children_;
  std::unordered_multimap<uint64_t, PrefixNodeId> full_index_;  // key(parent, tokens) -> full node
  std::set<Order> order_;                                       // every node, in eviction order
  PrefixNodeId next_id_ = 0;
  uint64_t tick_ = 0;
  int64_t evictions_ = 0;
};

}  // namespace dsinfer
