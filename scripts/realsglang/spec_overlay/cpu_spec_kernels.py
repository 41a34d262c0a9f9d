"""Pure-PyTorch versions of the CPU ops SGLang 0.5.23's speculative decoding calls.

The CPU build of sgl-kernel (compiled from source, for Xeon with AVX-512/AMX) provides these
ops; eagle-tui's shim (``sgl_kernel_shim``) only has the one the plain decode path needs. With
the ops below, NGRAM speculative decoding runs on any x86 CPU. Each one does what the Triton
kernel of the same name in ``sglang/kernels/ops`` does, one request at a time in Python: slow,
but these are tiny models. ``sitecustomize.py`` attaches them to the installed shim.
"""

from __future__ import annotations

import ctypes

import torch


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor, src_loc: torch.Tensor
) -> None:
    """For every KV buffer (one base pointer and row stride in bytes each), copy row
    ``src_loc[i]`` over row ``tgt_loc[i]`` (moving accepted drafts' KV into place)."""
    sources = [int(x) for x in src_loc.tolist()]
    targets = [int(x) for x in tgt_loc.tolist()]
    for pointer, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=True):
        base, row = int(pointer) & ((1 << 64) - 1), int(stride)
        rows = [ctypes.string_at(base + source * row, row) for source in sources]  # read first
        for target, data in zip(targets, rows, strict=True):
            ctypes.memmove(base + target * row, data, row)


def assign_extend_cache_locs_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int | None = None,
) -> None:
    """The reverse of ``assign_req_to_token_pool_cpu``: read each request's KV slots for
    positions ``start..end`` out of its req -> token row into ``out_cache_loc``, back to back."""
    del pool_len  # the table's width; plain indexing does not need it
    taken = 0
    for row, start, end in zip(
        req_pool_indices.tolist(), start_offset.tolist(), end_offset.tolist(), strict=True
    ):
        count = end - start
        if count > 0:
            out_cache_loc[taken : taken + count] = req_to_token[row, start:end].to(
                out_cache_loc.dtype
            )
        taken += max(count, 0)


def fill_bonus_tokens_cpu(
    accept_tokens: torch.Tensor,
    accept_lens: torch.Tensor,
    bonus_tokens: torch.Tensor,
    accept_stride: int,
) -> None:
    """Request ``i``'s bonus token is its last accepted one (``accept_lens`` counts it)."""
    flat = accept_tokens.reshape(-1)
    for i, length in enumerate(accept_lens.tolist()):
        bonus_tokens[i] = flat[accept_stride * i + length - 1]


def fill_accept_out_cache_loc_cpu(
    accept_index: torch.Tensor, out_cache_loc: torch.Tensor, accept_out_cache_loc: torch.Tensor
) -> None:
    """The KV slots of the accepted draft positions (``accept_index`` without its -1
    padding), packed in order."""
    index = accept_index.reshape(-1)
    index = index[index != -1]
    accept_out_cache_loc[: index.numel()] = out_cache_loc[index.long()].to(
        accept_out_cache_loc.dtype
    )


def verify_tree_greedy_cpu(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
) -> None:
    """Greedy verification of a draft tree (``verify_tree_greedy_kernel_triton``): walk down
    from the root, at each depth accept the first child whose token is the target's own next
    token, stop at the first depth with none. ``predicts`` gets the target's token at every
    accepted node and at the last one (the bonus)."""
    batch, drafts = candidates.shape[0], candidates.shape[1]
    depth_limit = accept_index.shape[1]
    target = target_predict.reshape(-1).tolist()
    tokens = candidates.reshape(batch, drafts).tolist()
    index = retrive_index.reshape(batch, drafts).tolist()
    first_child = retrive_next_token.reshape(batch, drafts).tolist()
    next_sibling = retrive_next_sibling.reshape(batch, drafts).tolist()
    for b in range(batch):
        last = index[b][0]
        accept_index[b, 0] = last
        accepted, node = 0, 0
        for _ in range(1, depth_limit):
            node = first_child[b][node]
            while node != -1 and tokens[b][node] != target[last]:
                node = next_sibling[b][node]
            if node == -1:
                break
            predicts[last] = target[last]
            accepted += 1
            accept_index[b, accepted] = index[b][node]
            last = index[b][node]
        accept_token_num[b] = accepted
        predicts[last] = target[last]


def reconstruct_indices_from_tree_mask(
    tree_mask: torch.Tensor,
    verified_seq_len: torch.Tensor,
    positions: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    batch_size: int,
    draft_token_num: int,
) -> None:
    """Positions, first child and next sibling of every draft node from the ancestor mask
    (``tree_mask[b, i, j]``: node ``j`` is an ancestor of ``i``), as
    ``sglang/kernels/ops/speculative/reconstruct_tree.py`` documents them."""
    n = draft_token_num
    masks = tree_mask.reshape(batch_size, n, n).to(torch.bool)
    row = torch.arange(n).view(n, 1)
    col = torch.arange(n).view(1, n)
    none = torch.full((n, n), -1)
    beyond = torch.full((n, n), n)
    for b in range(batch_size):
        ancestors = masks[b] & (col < row)
        span = slice(b * n, (b + 1) * n)
        positions[span] = ancestors.sum(1).to(positions.dtype) + int(verified_seq_len[b])
        parent = torch.where(ancestors, col.expand(n, n), none).max(1).values
        first_child = torch.where(ancestors, row.expand(n, n), beyond).min(0).values
        child = torch.where(ancestors.any(0), first_child, torch.full((n,), -1))
        same_parent = (parent.view(n, 1) == parent.view(1, n)) & (row > col)
        first_sibling = torch.where(same_parent, row.expand(n, n), beyond).min(0).values
        sibling = torch.where(
            (parent >= 0) & (first_sibling < n), first_sibling, torch.full((n,), -1)
        )
        retrive_index[span] = torch.arange(b * n, (b + 1) * n, dtype=retrive_index.dtype)
        retrive_next_token[span] = child.to(retrive_next_token.dtype)
        retrive_next_sibling[span] = sibling.to(retrive_next_sibling.dtype)


TOP_LEVEL_OPS = (
    copy_all_layer_kv_cache_cpu,
    assign_extend_cache_locs_cpu,
    fill_bonus_tokens_cpu,
    fill_accept_out_cache_loc_cpu,
    verify_tree_greedy_cpu,
)
SPECULATIVE_OPS = (reconstruct_indices_from_tree_mask,)  # sgl_kernel.speculative.<name>
