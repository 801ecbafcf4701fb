#include "engine/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace dsinfer {

PrefixCache::PrefixCache(KVCache& cache, KVCache* mtp_cache)
    : cache_(cache), mtp_cache_(mtp_cache) {}

PrefixCache::~PrefixCache() { clear(); }

uint64_t PrefixCache::key(PrefixNodeId parent, std::span<const int32_t> tokens) {
  // FNV-1a over the parent's id and the tokens; a key only narrows the search (find_full
  // compares parent and tokens), so a collision costs a comparison, never a wrong block
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  };
  mix(static_cast<uint64_t>(parent));
  for (int32_t t : tokens) mix(static_cast<uint32_t>(t));
  return h;
}

const std::vector<PrefixNodeId>& PrefixCache::children(PrefixNodeId parent) const {
  return parent == kPrefixRoot ? root_children_ : nodes_.at(parent).children;
}

std::vector<PrefixNodeId>& PrefixCache::children(PrefixNodeId parent) {
  return parent == kPrefixRoot ? root_children_ : nodes_.at(parent).children;
}

PrefixNodeId PrefixCache::find_full(PrefixNodeId parent, std::span<const int32_t> tokens) const {
  auto [begin, end] = full_index_.equal_range(key(parent, tokens));
  for (auto it = begin; it != end; ++it) {
    const Node& n = nodes_.at(it->second);
    if (n.parent == parent &&
        std::equal(n.tokens.begin(), n.tokens.end(), tokens.begin(), tokens.end()))
      return it->second;
  }
  return kNoPrefixNode;
}

int64_t PrefixCache::usable(const Node& n, std::span<const int32_t> rest) const {
  const int64_t limit = std::min<int64_t>(static_cast<int64_t>(n.tokens.size()),
                                          static_cast<int64_t>(rest.size()) - 1);
  int64_t m = 0;
  while (m < limit && n.tokens[m] == rest[m]) ++m;
  if (!mtp_cache_) return m;
  // the MTP entry at j took token j + 1: within the match it agrees; the last one's next token
  // is the node's next (or the token past it) against the prompt's
  int64_t valid = std::min(m, n.mtp_positions);
  if (valid == m && m > 0) {
    const int32_t seen = m < static_cast<int64_t>(n.tokens.size()) ? n.tokens[m] : n.next_token;
    if (seen != rest[m]) valid = m - 1;
  }
  return valid;
}

void PrefixCache::set_used(PrefixNodeId id, uint64_t used) {
  Node& n = nodes_.at(id);
  order_.erase(Order{n.used, -n.depth, id});
  n.used = used;
  order_.insert(Order{n.used, -n.depth, id});
}

PrefixCache::Match PrefixCache::lookup(std::span<const int32_t> tokens, int64_t limit) {
  check(limit >= 0 && limit < static_cast<int64_t>(tokens.size()), "prefix cache: lookup limit ",
        limit, " of ", tokens.size(), " tokens");
  Match match;
  PrefixNodeId parent = kPrefixRoot;
  int64_t pos = 0;
  while (pos + kKVBlock <= limit) {
    const PrefixNodeId id = find_full(parent, tokens.subspan(pos, kKVBlock));
    if (id == kNoPrefixNode) break;
    const Node& n = nodes_.at(id);
    if (mtp_cache_ && usable(n, tokens.subspan(pos, limit - pos + 1)) < kKVBlock) break;
    match.path.push_back(id);
    match.blocks.push_back(n.block);
    if (mtp_cache_) match.mtp_blocks.push_back(n.mtp_block);
    pos += kKVBlock;
    parent = id;
  }
  // the start of the next block: the child (a tail, or a full block matched in part) that
  // covers the most of what follows
  PrefixNodeId best = kNoPrefixNode;
  int64_t best_positions = 0;
  for (PrefixNodeId c : children(parent)) {
    const int64_t n =
        std::min<int64_t>(usable(nodes_.at(c), tokens.subspan(pos, limit - pos + 1)), kKVBlock - 1);
    if (n > best_positions) {
      best = c;
      best_positions = n;
    }
  }
  ++tick_;
  for (PrefixNodeId id : match.path) set_used(id, tick_);
  if (best != kNoPrefixNode) {
    const Node& n = nodes_.at(best);
    match.copy_from = n.block;
    match.mtp_copy_from = n.mtp_block;
    match.copy_positions = best_positions;
    set_used(best, tick_);
  }
  return match;
}

void PrefixCache::touch(std::span<const PrefixNodeId> path) {
  ++tick_;
  for (PrefixNodeId id : path) set_used(id, tick_);
}

PrefixNodeId PrefixCache::insert(Node node) {
  const PrefixNodeId id = next_id_++;
  if (node.parent != kPrefixRoot) {
    const Node& p = nodes_.at(node.parent);
    node.depth = p.depth + 1;
    node.used = p.used;  // never more recent than its parent: leaves are evicted first
  } else {
    node.used = tick_;
  }
  children(node.parent).push_back(id);
  if (node.full()) full_index_.emplace(key(node.parent, node.tokens), id);
  order_.insert(Order{node.used, -node.depth, id});
  nodes_.emplace(id, std::move(node));
  return id;
}

PrefixNodeId PrefixCache::add_block(PrefixNodeId parent, std::span<const int32_t> tokens, SeqId seq,
                                    int64_t index) {
  check(static_cast<int64_t>(tokens.size()) == kKVBlock, "prefix cache: a full block has ",
        kKVBlock, " tokens");
  if (const PrefixNodeId existing = find_full(parent, tokens); existing != kNoPrefixNode) {
    cache_.replace_block(seq, index, nodes_.at(existing).block);
    return existing;
  }
  // tails this block extends are covered by it now (with MTP they may hold MTP entries it lacks)
  if (!mtp_cache_) {
    const std::vector<PrefixNodeId> siblings = children(parent);
    for (PrefixNodeId c : siblings) {
      const Node& n = nodes_.at(c);
      if (!n.full() && std::equal(n.tokens.begin(), n.tokens.end(), tokens.begin())) erase(c);
    }
  }
  Node node;
  node.parent = parent;
  node.tokens.assign(tokens.begin(), tokens.end());
  node.block = cache_.blocks(seq)[static_cast<size_t>(index)];
  cache_.retain_block(node.block);
  return insert(std::move(node));
}

void PrefixCache::add_mtp_block(PrefixNodeId id, SeqId mtp_seq, int64_t index, int32_t next_token) {
  Node& n = nodes_.at(id);
  const BlockId block = mtp_cache_->blocks(mtp_seq)[static_cast<size_t>(index)];
  if (n.mtp_block < 0) {
    mtp_cache_->retain_block(block);
    n.mtp_block = block;
    n.mtp_positions = kKVBlock;
    n.next_token = next_token;
  } else if (n.next_token == next_token && n.mtp_positions == kKVBlock) {
    mtp_cache_->replace_block(mtp_seq, index, n.mtp_block);
  }
}

void PrefixCache::add_tail(PrefixNodeId parent, std::span<const int32_t> tokens, SeqId seq,
                           int64_t index, SeqId mtp_seq, int64_t mtp_positions,
                           int32_t next_token) {
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  check(n_tokens < kKVBlock, "prefix cache: a tail has fewer than ", kKVBlock, " tokens");
  if (n_tokens == 0) return;
  if (!mtp_cache_) mtp_positions = 0;
  auto covers = [](std::span<const int32_t> longer, std::span<const int32_t> shorter) {
    return longer.size() >= shorter.size() &&
           std::equal(shorter.begin(), shorter.end(), longer.begin());
  };
  const std::vector<PrefixNodeId> siblings = children(parent);
  for (PrefixNodeId c : siblings) {
    const Node& n = nodes_.at(c);
    if (covers(n.tokens, tokens) && n.mtp_positions >= mtp_positions) return;  // nothing new
  }
  for (PrefixNodeId c : siblings) {
    const Node& n = nodes_.at(c);
    if (!n.full() && covers(tokens, n.tokens) && mtp_positions >= n.mtp_positions)
      erase(c);  // the new tail extends it
  }
  Node node;
  node.parent = parent;
  node.tokens.assign(tokens.begin(), tokens.end());
  node.block = cache_.blocks(seq)[static_cast<size_t>(index)];
  cache_.retain_block(node.block);
  if (mtp_positions > 0) {
    node.mtp_block = mtp_cache_->blocks(mtp_seq)[static_cast<size_t>(index)];
    mtp_cache_->retain_block(node.mtp_block);
    node.mtp_positions = mtp_positions;
    node.next_token = next_token;
  }
  insert(std::move(node));
}

bool PrefixCache::evictable(const Node& n) const {
  return n.children.empty() && cache_.refs(n.block) == 1 &&
         (n.mtp_block < 0 || mtp_cache_->refs(n.mtp_block) == 1);
}

void PrefixCache::erase(PrefixNodeId id) {
  const Node& n = nodes_.at(id);
  check(n.children.empty(), "prefix cache: node ", id, " still has children");
  cache_.release_block(n.block);
  if (n.mtp_block >= 0) mtp_cache_->release_block(n.mtp_block);
  auto& siblings = children(n.parent);
  siblings.erase(std::find(siblings.begin(), siblings.end(), id));
  if (n.full()) {
    auto [begin, end] = full_index_.equal_range(key(n.parent, n.tokens));
    for (auto it = begin; it != end; ++it)
      if (it->second == id) {
        full_index_.erase(it);
        break;
      }
  }
  order_.erase(Order{n.used, -n.depth, id});
  nodes_.erase(id);
}

bool PrefixCache::make_room(int64_t blocks) {
  auto enough = [&] {
    return cache_.free_blocks() >= blocks && (!mtp_cache_ || mtp_cache_->free_blocks() >= blocks);
  };
  // one pass in eviction order: a node's children come before it, so a parent whose last child
  // goes in this pass is reached after it
  for (auto it = order_.begin(); it != order_.end() && !enough();) {
    const PrefixNodeId id = it->id;
    ++it;
    if (evictable(nodes_.at(id))) {
      erase(id);
      ++evictions_;
    }
  }
  return enough();
}

void PrefixCache::clear() {
  for (const auto& [id, n] : nodes_) {
    cache_.release_block(n.block);
    if (n.mtp_block >= 0) mtp_cache_->release_block(n.mtp_block);
  }
  nodes_.clear();
  root_children_.clear();
  full_index_.clear();
  order_.clear();
}

}  // namespace dsinfer
