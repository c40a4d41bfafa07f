"""The look-ahead's rollouts compiled with numba: :class:`heuristics.lookahead._Sim` over arrays.

Imported only where numba is installed, by :mod:`heuristics.lookahead_kernel` (which says when it is used).
Every function here is the method of ``_Sim`` it names, statement for statement: the same comparisons in
the same order, the same floating-point operations on the same values, the same heap algorithm as
CPython's ``heapq`` (so the heap's array, which :func:`_terminal` sums in order, is the same list), so a
rollout returns the same score bit for bit (``tests/test_speed_identity.py`` compares whole runs).

Jobs are numbered ``0..K-1`` in the order of their ids as strings (``sorted`` of the ids: the model's
tie-breaks sort job ids). A ratio of ``NaN`` is a pair that may not share (``None`` in ``_Sim``).

State (copied for each rollout): ``si`` the integer scalars (indices below), ``sf`` the float ones, ``occ``
/ ``occn`` the jobs on each GPU, ``mem``, ``released``, ``freeg`` (idle GPUs), ``fnode`` (idle GPUs per
node), the running records as columns (``running``, ``jg``/``jn`` its GPUs, ``titer``, ``prog``, ``tat``,
``rate``, ``ver``, ``own``), ``pend`` the pending jobs in priority order, and the heap ``hd``/``hs``/``hj``
(completion time, sequence number = version, job).
"""

# ruff: noqa: RUF059  (each function unpacks whole state tuples: numba needs every element named)
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from heuristics.lookahead import _MEMORY_SLACK as MEMORY_SLACK
from heuristics.lookahead import REL_TOL
from heuristics.sjf_bsbf import TIE_TOLERANCE

State = tuple[Any, ...]
"""A tuple of state arrays (see the module docstring)."""

# si: integer scalars of the state
SEQ = 0
NEXT_ARR = 1
FREE = 2
NSINGLE = 3
PN = 4
HN = 5
PVALID = 6  # the partner list (scratch) is current
NPART = 7
# sf: float scalars
T = 0
TOTAL = 1


# --- heapq, as CPython does it (entries (done, seq, job); seq is unique) -------------------------------------
@njit(cache=True, nogil=True)
def _siftdown(hd: np.ndarray, hs: np.ndarray, hj: np.ndarray, startpos: int, pos: int) -> None:
    nd = hd[pos]
    ns = hs[pos]
    nj = hj[pos]
    while pos > startpos:
        parentpos = (pos - 1) >> 1
        pd = hd[parentpos]
        ps = hs[parentpos]
        if nd < pd or (nd == pd and ns < ps):
            hd[pos] = pd
            hs[pos] = ps
            hj[pos] = hj[parentpos]
            pos = parentpos
            continue
        break
    hd[pos] = nd
    hs[pos] = ns
    hj[pos] = nj


@njit(cache=True, nogil=True)
def _siftup(hd: np.ndarray, hs: np.ndarray, hj: np.ndarray, endpos: int, pos: int) -> None:
    startpos = pos
    nd = hd[pos]
    ns = hs[pos]
    nj = hj[pos]
    childpos = 2 * pos + 1
    while childpos < endpos:
        rightpos = childpos + 1
        if rightpos < endpos and not (
            hd[childpos] < hd[rightpos] or (hd[childpos] == hd[rightpos] and hs[childpos] < hs[rightpos])
        ):
            childpos = rightpos
        hd[pos] = hd[childpos]
        hs[pos] = hs[childpos]
        hj[pos] = hj[childpos]
        pos = childpos
        childpos = 2 * pos + 1
    hd[pos] = nd
    hs[pos] = ns
    hj[pos] = nj
    _siftdown(hd, hs, hj, startpos, pos)


@njit(cache=True, nogil=True)
def _push(si: np.ndarray, hd: np.ndarray, hs: np.ndarray, hj: np.ndarray, done: float, seq: int, job: int) -> None:
    n = si[HN]
    if n >= hd.shape[0]:
        raise IndexError("look-ahead kernel: heap capacity exceeded")
    hd[n] = done
    hs[n] = seq
    hj[n] = job
    si[HN] = n + 1
    _siftdown(hd, hs, hj, 0, n)


@njit(cache=True, nogil=True)
def _pop(si: np.ndarray, hd: np.ndarray, hs: np.ndarray, hj: np.ndarray) -> None:
    """Remove the smallest entry (the caller read it at index 0)."""
    n = si[HN] - 1
    si[HN] = n
    if n > 0:
        hd[0] = hd[n]
        hs[0] = hs[n]
        hj[0] = hj[n]
        _siftup(hd, hs, hj, n, 0)


# --- placement --------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _take(freeg: np.ndarray, node: int, gpn: int, k: int, out: np.ndarray, taken: int) -> int:
    """Append the first ``k`` idle GPUs of ``node`` (ascending: ``free_by_node[node][:k]``) to ``out``."""
    g = node * gpn
    end = g + gpn
    got = 0
    while g < end and got < k:
        if freeg[g]:
            out[taken + got] = g
            got += 1
        g += 1
    return taken + got


@njit(cache=True, nogil=True)
def _node_order(fnode: np.ndarray, nodes: np.ndarray, count: int, order: np.ndarray) -> None:
    """``nodes[:count]`` sorted by (-idle GPUs, node) into ``order`` (stable insertion sort of ascending nodes)."""
    for i in range(count):
        node = nodes[i]
        j = i - 1
        while j >= 0 and (fnode[order[j]] < fnode[node] or (fnode[order[j]] == fnode[node] and order[j] > node)):
            order[j + 1] = order[j]
            j -= 1
        order[j + 1] = node


@njit(cache=True, nogil=True)
def _pick_free(
    si: np.ndarray,
    freeg: np.ndarray,
    fnode: np.ndarray,
    gpn: int,
    count: int,
    near: np.ndarray,
    has_near: bool,
    out: np.ndarray,
    nodes_buf: np.ndarray,
    order_buf: np.ndarray,
) -> int:
    """``_Sim.pick_free``: writes the GPUs to ``out``; returns how many (``count``) or -1 (``None``)."""
    if count <= 0:
        return 0
    if si[FREE] < count:
        return -1
    nnodes = fnode.shape[0]
    taken = 0
    if has_near:
        m = 0
        for node in range(nnodes):
            if near[node]:
                nodes_buf[m] = node
                m += 1
        _node_order(fnode, nodes_buf, m, order_buf)
        for i in range(m):
            taken = _take(freeg, order_buf[i], gpn, count - taken, out, taken)
            if taken == count:
                return taken
    need = count - taken
    best_node = -1
    best_free = 1 << 30
    for node in range(nnodes):
        size = fnode[node]
        if need <= size and size < best_free and not (has_near and near[node]):
            best_node = node
            best_free = size
    if best_node >= 0:
        return _take(freeg, best_node, gpn, need, out, taken)
    m = 0
    for node in range(nnodes):
        if not (has_near and near[node]) and fnode[node] > 0:
            nodes_buf[m] = node
            m += 1
    _node_order(fnode, nodes_buf, m, order_buf)
    for i in range(m):
        taken = _take(freeg, order_buf[i], gpn, count - taken, out, taken)
        if taken == count:
            break
    return taken if taken == count else -1


@njit(cache=True, nogil=True)
def _schedule_end(
    si: np.ndarray,
    ver: np.ndarray,
    hd: np.ndarray,
    hs: np.ndarray,
    hj: np.ndarray,
    j: int,
    now: float,
    new_rate: float,
    iterations: float,
    remaining: float,
    slot: float,
    slotted: bool,
) -> None:
    """Push job ``j``'s completion at ``new_rate`` from ``now`` with a fresh version, as ``_Sim._rerate``
    and ``_Sim.start`` do: continuous, or rounded up to whole slots as the slotted simulator does."""
    if not slotted:
        done = now + (remaining if remaining > 0.0 else 0.0) / new_rate  # max(0.0, remaining)
    else:
        slots = float(math.ceil((remaining - REL_TOL * iterations) / (new_rate * slot)))
        if slots < 1.0:  # max(1, ceil(...))
            slots = 1.0
        done = (np.rint(now / slot) + slots) * slot  # round() is half-even, as rint
    seq = si[SEQ] + 1
    si[SEQ] = seq
    ver[j] = seq
    _push(si, hd, hs, hj, done, seq, j)


# --- dynamics ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _rerate(s: State, w: State, jobs: np.ndarray, count: int, slot: float, slotted: bool) -> None:
    """``_Sim._rerate`` of ``jobs[:count]`` (ascending: the sorted order)."""
    sa, sb = s
    gpn, capacity, gpu_memory, room_level, demand, iters, alone, arrival, keyrank = sa
    nmodes, mmem, mtib, halfseq, titer_tab, ratio, at, aj = sb
    wa, wb, wc = w
    si, sf, occ, occn, mem, released, freeg, fnode = wa
    running, jg, jn, titer, prog, tat, rate, ver, own = wb
    pend, hd, hs, hj = wc
    now = sf[T]
    for idx in range(count):
        j = jobs[idx]
        if now > tat[j]:
            prog[j] += rate[j] * (now - tat[j])
            tat[j] = now
        xi = 1.0
        for k in range(jn[j]):  # the co-runners: a max, in any order
            g = jg[j, k]
            for c in range(occn[g]):
                o = occ[g, c]
                if o != j:
                    r = ratio[j, o]
                    if r > xi:  # NaN (may not share) is never larger
                        xi = r
        new_rate = 1.0 / (titer[j] * xi)
        if new_rate == rate[j]:
            continue
        rate[j] = new_rate
        iterations = iters[j]
        _schedule_end(si, ver, hd, hs, hj, j, now, new_rate, iterations, iterations - prog[j], slot, slotted)


@njit(cache=True, nogil=True)
def _start(
    s: State, w: State, x: State, j: int, gpus: np.ndarray, ngpus: int, mode: int, slot: float, slotted: bool
) -> None:
    """``_Sim.start`` (progress 0) of job ``j`` on ``gpus[:ngpus]`` in mode ``mode``."""
    sa, sb = s
    gpn, capacity, gpu_memory, room_level, demand, iters, alone, arrival, keyrank = sa
    nmodes, mmem, mtib, halfseq, titer_tab, ratio, at, aj = sb
    wa, wb, wc = w
    si, sf, occ, occn, mem, released, freeg, fnode = wa
    running, jg, jn, titer, prog, tat, rate, ver, own = wb
    pend, hd, hs, hj = wc
    mark, buf, fin, todo, started, slot_of, pj, px, pu, pg, pgn, pord, sc_i, sc_f, sc_g, free_at, work = x
    memory = mmem[j, mode]
    idle = 0
    shared = 0
    ntouched = 0
    for k in range(ngpus):
        g = gpus[k]
        n = occn[g]
        if n == 0:
            freeg[g] = False
            fnode[g // gpn] -= 1
            idle += 1
        else:
            if n == 1:
                shared += 1
            for c in range(n):
                o = occ[g, c]
                if not mark[o]:
                    mark[o] = True
                    buf[ntouched] = o
                    ntouched += 1
        occ[g, n] = j
        occn[g] = n + 1
        mem[g] += memory
    si[FREE] -= idle
    si[NSINGLE] += idle - shared
    si[PVALID] = 0
    # nodes the GPU set spans
    nodes = 0
    for k in range(ngpus):
        node = gpus[k] // gpn
        seen = False
        for q in range(k):
            if gpus[q] // gpn == node:
                seen = True
                break
        if not seen:
            nodes += 1
    for k in range(ngpus):
        jg[j, k] = gpus[k]
    jn[j] = ngpus
    running[j] = True
    titer[j] = titer_tab[j, mode, nodes]
    prog[j] = 0.0
    tat[j] = sf[T]
    rate[j] = 0.0
    ver[j] = -1
    own[j] = memory
    if ntouched == 0:
        new_rate = 1.0 / (titer[j] * 1.0)
        if new_rate == 0.0:
            return
        rate[j] = new_rate
        iterations = iters[j]
        _schedule_end(si, ver, hd, hs, hj, j, sf[T], new_rate, iterations, iterations - 0.0, slot, slotted)
        return
    buf[ntouched] = j
    ntouched += 1
    for k in range(ntouched):
        mark[buf[k]] = False
    buf[:ntouched].sort()
    _rerate(s, w, buf, ntouched, slot, slotted)


@njit(cache=True, nogil=True)
def _arrive(
    si: np.ndarray, pend: np.ndarray, keyrank: np.ndarray, at: np.ndarray, aj: np.ndarray, limit: float
) -> None:
    """``_Sim._arrive``: queue the arrivals up to ``limit`` in priority order."""
    while si[NEXT_ARR] < at.shape[0] and at[si[NEXT_ARR]] <= limit:
        j = aj[si[NEXT_ARR]]
        si[NEXT_ARR] += 1
        rank = keyrank[j]
        n = si[PN]
        index = n
        while index > 0 and keyrank[pend[index - 1]] > rank:
            index -= 1
        for q in range(n, index, -1):
            pend[q] = pend[q - 1]
        pend[index] = j
        si[PN] = n + 1


@njit(cache=True, nogil=True)
def _next_event(s: State, w: State, x: State, slot: float, slotted: bool) -> bool:
    """``_Sim.next_event``: False when nothing runs and nothing is left to arrive."""
    sa, sb = s
    gpn, capacity, gpu_memory, room_level, demand, iters, alone, arrival, keyrank = sa
    nmodes, mmem, mtib, halfseq, titer_tab, ratio, at, aj = sb
    wa, wb, wc = w
    si, sf, occ, occn, mem, released, freeg, fnode = wa
    running, jg, jn, titer, prog, tat, rate, ver, own = wb
    pend, hd, hs, hj = wc
    mark, buf, fin, todo, started, slot_of, pj, px, pu, pg, pgn, pord, sc_i, sc_f, sc_g, free_at, work = x
    done = math.inf
    while si[HN] > 0:
        j = hj[0]
        if not running[j] or ver[j] != hs[0]:
            _pop(si, hd, hs, hj)
            continue
        done = hd[0]
        break
    coming = at[si[NEXT_ARR]] if si[NEXT_ARR] < at.shape[0] else math.inf
    now = coming if coming < done else done  # min(done, coming)
    if now == math.inf:
        return False
    scale = abs(now)
    limit = now + 1e-9 * (scale if scale > 1.0 else 1.0)  # max(1.0, abs(now))
    if coming <= limit:
        _arrive(si, pend, keyrank, at, aj, limit)
    nfin = 0
    while si[HN] > 0 and hd[0] <= limit:
        j = hj[0]
        version = hs[0]
        _pop(si, hd, hs, hj)
        if running[j] and ver[j] == version:
            fin[nfin] = j
            nfin += 1
    sf[T] = now
    si[PVALID] = 0
    freed = 0
    new_single = 0
    ntouched = 0
    for f in range(nfin):
        j = fin[f]
        running[j] = False
        sf[TOTAL] += now
        memory = own[j]
        for k in range(jn[j]):
            g = jg[j, k]
            n = occn[g]
            # remove j from the GPU (the order of the others does not matter) and note its co-runners
            pos = 0
            for c in range(n):
                o = occ[g, c]
                if o != j:
                    occ[g, pos] = o
                    pos += 1
                    if not mark[o]:
                        mark[o] = True
                        buf[ntouched] = o
                        ntouched += 1
            left = n - 1
            occn[g] = left
            if left:
                mem[g] -= memory
                if left == 1:
                    new_single += 1
            else:
                mem[g] = 0.0
                released[g] = now
                freeg[g] = True
                fnode[g // gpn] += 1
                freed += 1
    si[FREE] += freed
    si[NSINGLE] += new_single - freed
    if ntouched:
        count = 0
        for k in range(ntouched):
            o = buf[k]
            mark[o] = False
            if running[o]:
                buf[count] = o
                count += 1
        buf[:count].sort()
        _rerate(s, w, buf, count, slot, slotted)
    return True


@njit(cache=True, nogil=True)
def _drop(si: np.ndarray, pend: np.ndarray, j: int) -> None:
    n = si[PN]
    index = 0
    while pend[index] != j:
        index += 1
    for q in range(index, n - 1):
        pend[q] = pend[q + 1]
    si[PN] = n - 1


# --- the base policies ------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _partner_list(s: State, w: State, x: State) -> int:
    """``_Sim.partner_list`` into the scratch columns (``pord``: the sorted order); cached until the next
    start or event."""
    sa, sb = s
    gpn, capacity, gpu_memory, room_level, demand, iters, alone, arrival, keyrank = sa
    nmodes, mmem, mtib, halfseq, titer_tab, ratio, at, aj = sb
    wa, wb, wc = w
    si, sf, occ, occn, mem, released, freeg, fnode = wa
    running, jg, jn, titer, prog, tat, rate, ver, own = wb
    pend, hd, hs, hj = wc
    mark, buf, fin, todo, started, slot_of, pj, px, pu, pg, pgn, pord, sc_i, sc_f, sc_g, free_at, work = x
    if si[PVALID]:
        return si[NPART]
    count = 0
    if si[NSINGLE]:
        for g in range(occn.shape[0]):
            if occn[g] == 1:
                j = occ[g, 0]
                p = slot_of[j]
                if p < 0:
                    p = count
                    slot_of[j] = p
                    pj[p] = j
                    pgn[p] = 0
                    count += 1
                pg[p, pgn[p]] = g
                pgn[p] += 1
        t = sf[T]
        for p in range(count):
            j = pj[p]
            slot_of[j] = -1
            left = iters[j] - (prog[j] + rate[j] * (t - tat[j]))
            if pgn[p] == 1:
                used = mem[pg[p, 0]]
            else:
                used = mem[pg[p, 0]]
                for k in range(1, pgn[p]):
                    if mem[pg[p, k]] > used:
                        used = mem[pg[p, k]]
            px[p] = (left if left > 0.0 else 0.0) * titer[j]
            pu[p] = used
            # stable insertion into the sorted order
            q = p - 1
            while q >= 0 and px[pord[q]] > px[p]:
                pord[q + 1] = pord[q]
                q -= 1
            pord[q + 1] = p
    si[NPART] = count
    si[PVALID] = 1
    return count


@njit(cache=True, nogil=True)
def _pair_value(s: State, j: int, o: int, x_a: float, used: float, veto: bool) -> tuple[int, float, int]:
    """Theorem 1 / Algorithm 2 of job ``j`` next to partner ``o`` (as ``share_options``' loop body):
    ``(kind, value, mode)``; kind 0: no option (may not share / no mode fits / vetoed), 1: share, 2: the
    sequential value (no veto)."""
    sa, sb = s
    gpn, capacity, gpu_memory, room_level, demand, iters, alone, arrival, keyrank = sa
    nmodes, mmem, mtib, halfseq, titer_tab, ratio, at, aj = sb
    gpu_memory = gpu_memory + MEMORY_SLACK
    xi_a = ratio[o, j]
    xi_b = ratio[j, o]
    if math.isnan(xi_a) or math.isnan(xi_b):
        return 0, 0.0, -1
    mode = -1
    for m in range(nmodes[j]):  # fastest first
        if used + mmem[j, m] <= gpu_memory:
            mode = m
            break
    if mode < 0:
        return 0, 0.0, -1
    alone_b = mtib[j, mode]
    shared_a = xi_a * x_a
    shared_b = xi_b * alone_b
    if shared_a <= shared_b:
        overlap = shared_a + 0.5 * (alone_b - shared_a / xi_b)
    else:
        overlap = shared_b + 0.5 * (x_a - shared_b / xi_a)
    sequential = x_a + halfseq[j]
    if overlap < sequential - TIE_TOLERANCE * abs(sequential):  # a tie waits (theorem1_share)
        return 1, overlap, mode
    if not veto:
        return 2, sequential, mode
    return 0, 0.0, -1


@njit(cache=True, nogil=True)
def _base_step(s: State, w: State, x: State, base: int, slot: float, slotted: bool, scan: int, tries: int) -> None:
    """``_Sim.base_step``: the base policy's starts now (base 0 ``bsbf``, 1 ``nosharing``, 2 ``share``)."""
    sa, sb = s
    gpn, capacity, gpu_memory, room_level, demand, iters, alone, arrival, keyrank = sa
    nmodes, mmem, mtib, halfseq, titer_tab, ratio, at, aj = sb
    wa, wb, wc = w
    si, sf, occ, occn, mem, released, freeg, fnode = wa
    running, jg, jn, titer, prog, tat, rate, ver, own = wb
    pend, hd, hs, hj = wc
    mark, buf, fin, todo, started, slot_of, pj, px, pu, pg, pgn, pord, sc_i, sc_f, sc_g, free_at, work = x
    if si[PN] == 0:
        return
    sharing = base != 1 and capacity >= 2
    veto = base == 0
    single = si[NSINGLE] if sharing else 0
    free = si[FREE]
    if free + single == 0:
        return
    level = room_level[free + single]
    ntodo = 0
    for q in range(si[PN]):
        j = pend[q]
        if demand[j] <= level:
            todo[ntodo] = j
            ntodo += 1
    nstarted = 0
    have_partners = False
    npart = 0
    partner_gpus = -1
    opt_v = sc_f
    opt_p = sc_i[0]
    opt_m = sc_i[1]
    gpus = sc_g[0]
    near = sc_g[1]
    nodes_buf = sc_g[2]
    order_buf = sc_g[3]
    share_limit = 0
    for idx in range(ntodo):
        j = todo[idx]
        if free + single == 0:
            break
        d = demand[j]
        if d > free + single:
            continue
        if d <= free:
            ngpus = _pick_free(si, freeg, fnode, gpn, d, near, False, gpus, nodes_buf, order_buf)
            mode = 0
        else:
            if tries <= 0:
                if not free:
                    break
                continue
            tries -= 1
            if not have_partners:
                npart = _partner_list(s, w, x)
                have_partners = True
                partner_gpus = -1
            share_limit = npart if scan < 0 else min(scan, npart)
            if d == 1:
                # best_share: the first option of least pair JCT
                found = -1
                best = math.inf
                mode = -1
                for q in range(share_limit):
                    p = pord[q]
                    kind, value, m = _pair_value(s, j, pj[p], px[p], pu[p], veto)
                    if kind == 0:
                        continue
                    if found < 0 or value < best:
                        best = value
                        found = p
                        mode = m
                if found < 0:
                    continue
                gpus[0] = pg[found, 0]
                ngpus = 1
            else:
                if partner_gpus < 0:
                    partner_gpus = 0
                    for q in range(share_limit):
                        partner_gpus += pgn[pord[q]]
                if partner_gpus + free < d:
                    continue
                # share_options(veto, need = d - free, scanned_gpus = partner_gpus)
                need = d - free
                potential = partner_gpus if veto else 1 << 30
                nopt = 0
                failed = False
                for q in range(share_limit):
                    p = pord[q]
                    kind, value, m = _pair_value(s, j, pj[p], px[p], pu[p], veto)
                    if kind == 0:
                        if veto:
                            potential -= pgn[p]
                            if potential < need:
                                failed = True
                                break
                        continue
                    # stable insertion by value
                    r = nopt - 1
                    while r >= 0 and opt_v[r] > value:
                        opt_v[r + 1] = opt_v[r]
                        opt_p[r + 1] = opt_p[r]
                        opt_m[r + 1] = opt_m[r]
                        r -= 1
                    opt_v[r + 1] = value
                    opt_p[r + 1] = p
                    opt_m[r + 1] = m
                    nopt += 1
                if failed or nopt == 0:
                    continue
                total_gpus = 0
                for r in range(nopt):
                    total_gpus += pgn[opt_p[r]]
                if total_gpus + free < d:
                    continue
                # gang_from
                ngpus = 0
                nseen = 0
                for r in range(nopt):
                    p = opt_p[r]
                    k = 0
                    while k < pgn[p] and ngpus < d:
                        gpus[ngpus] = pg[p, k]
                        ngpus += 1
                        k += 1
                    nseen += 1
                    if ngpus == d:
                        break
                if ngpus == 0:
                    continue
                if ngpus < d:
                    for node in range(near.shape[0]):
                        near[node] = False
                    for k in range(ngpus):
                        near[gpus[k] // gpn] = True
                    extra = _pick_free(si, freeg, fnode, gpn, d - ngpus, near, True, gpus[ngpus:], nodes_buf, order_buf)
                    if extra < 0:
                        continue
                    ngpus += extra
                if nseen == 1:
                    mode = opt_m[0]
                else:
                    fullest = 0.0
                    for k in range(ngpus):
                        if k == 0 or mem[gpus[k]] > fullest:
                            fullest = mem[gpus[k]]
                    budget = gpu_memory - fullest
                    mode = -1
                    for m in range(nmodes[j]):
                        if mmem[j, m] <= budget + MEMORY_SLACK:
                            mode = m
                            break
                    if mode < 0:
                        continue
        _start(s, w, x, j, gpus, ngpus, mode, slot, slotted)
        started[nstarted] = j
        nstarted += 1
        have_partners = False
        free = si[FREE]
        if sharing:
            single = si[NSINGLE]
    for q in range(nstarted):
        _drop(si, pend, started[q])


@njit(cache=True, nogil=True)
def _terminal(s: State, w: State, x: State, tail: float) -> float:
    """``_Sim.terminal``: completed sum + the rest estimated (heap entries summed in the heap's order)."""
    sa, sb = s
    gpn, capacity, gpu_memory, room_level, demand, iters, alone, arrival, keyrank = sa
    nmodes, mmem, mtib, halfseq, titer_tab, ratio, at, aj = sb
    wa, wb, wc = w
    si, sf, occ, occn, mem, released, freeg, fnode = wa
    running, jg, jn, titer, prog, tat, rate, ver, own = wb
    pend, hd, hs, hj = wc
    mark, buf, fin, todo, started, slot_of, pj, px, pu, pg, pgn, pord, sc_i, sc_f, sc_g, free_at, work = x
    total = sf[TOTAL]
    ngpu = free_at.shape[0]
    for g in range(ngpu):
        free_at[g] = sf[T]
    for e in range(si[HN]):
        j = hj[e]
        if running[j] and ver[j] == hs[e]:
            done = hd[e]
            total += done
            for k in range(jn[j]):
                g = jg[j, k]
                if done > free_at[g]:
                    free_at[g] = done
    npend = si[PN]
    nlater = aj.shape[0] - si[NEXT_ARR]
    if npend or nlater > 0:
        free_at.sort()
        for q in range(npend + max(nlater, 0)):
            j = pend[q] if q < npend else aj[si[NEXT_ARR] + q - npend]
            d = demand[j]
            begin = arrival[j] if arrival[j] > free_at[d - 1] else free_at[d - 1]  # max(free_at[d-1], arrival)
            done = begin + iters[j] * alone[j]
            total += done
            # del free_at[:d]; insert d copies of done at bisect_right
            rest = ngpu - d
            at = 0
            while at < rest and free_at[d + at] <= done:
                at += 1
            for k in range(at):
                work[k] = free_at[d + k]
            for k in range(d):
                work[at + k] = done
            for k in range(at, rest):
                work[d + k] = free_at[d + k]
            for k in range(ngpu):
                free_at[k] = work[k]
    if tail:
        acc = 0.0  # sum(free_at), left to right
        for g in range(ngpu):
            acc += free_at[g]
        return total + tail * acc
    return total + 0.0


# --- the scoring of a pilot step's candidates ----------------------------------------------------------------
@njit(cache=True, nogil=True)
def score(
    gpn: int, capacity: int, gpu_memory: float, room_level: np.ndarray, demand: np.ndarray, iters: np.ndarray,
    alone: np.ndarray, arrival: np.ndarray, keyrank: np.ndarray, nmodes: np.ndarray, mmem: np.ndarray,
    mtib: np.ndarray, halfseq: np.ndarray, titer_tab: np.ndarray, ratio: np.ndarray,
    si0: np.ndarray, sf0: np.ndarray, occ0: np.ndarray, occn0: np.ndarray, mem0: np.ndarray, released0: np.ndarray,
    running0: np.ndarray, jg0: np.ndarray, jn0: np.ndarray, titer0: np.ndarray, prog0: np.ndarray,
    tat0: np.ndarray, rate0: np.ndarray, ver0: np.ndarray, own0: np.ndarray,
    pend0: np.ndarray, hd0: np.ndarray, hs0: np.ndarray, hj0: np.ndarray, at: np.ndarray, aj: np.ndarray,
    cjob: np.ndarray, cmode: np.ndarray, cgpus: np.ndarray, cng: np.ndarray, bases: np.ndarray,
    slot: float, slotted: bool, max_events: int, scan: int, tail: float, tries: int,
) -> tuple[np.ndarray, int, int]:  # fmt: skip
    """``LookaheadPolicy._score`` of every candidate (``cjob`` -1: stop): ``(best score per candidate,
    rollouts, simulated events)``."""
    ngpu = occ0.shape[0]
    nnodes = ngpu // gpn
    kjobs = demand.shape[0]
    # heap room: its entries now plus at most (running jobs + 1) per start and per event
    cap = hd0.shape[0] + (kjobs + max_events + 4) * (kjobs + 2)
    si = si0.copy()
    sf = sf0.copy()
    occ = np.empty((ngpu, max(occ0.shape[1], capacity, 2) + 1), dtype=np.int64)
    occn = occn0.copy()
    mem = mem0.copy()
    released = released0.copy()
    freeg = np.empty(ngpu, dtype=np.bool_)
    fnode = np.empty(nnodes, dtype=np.int64)
    running = running0.copy()
    jg = jg0.copy()
    jn = jn0.copy()
    titer = titer0.copy()
    prog = prog0.copy()
    tat = tat0.copy()
    rate = rate0.copy()
    ver = ver0.copy()
    own = own0.copy()
    pend = np.empty(kjobs + 1, dtype=np.int64)
    hd = np.empty(cap)
    hs = np.empty(cap, dtype=np.int64)
    hj = np.empty(cap, dtype=np.int64)
    # scratch
    mark = np.zeros(kjobs, dtype=np.bool_)
    buf = np.empty(kjobs + 1, dtype=np.int64)
    fin = np.empty(kjobs + 1, dtype=np.int64)
    todo = np.empty(kjobs + 1, dtype=np.int64)
    started = np.empty(kjobs + 1, dtype=np.int64)
    slot_of = np.full(kjobs, -1, dtype=np.int64)
    pj = np.empty(ngpu, dtype=np.int64)
    px = np.empty(ngpu)
    pu = np.empty(ngpu)
    pg = np.empty((ngpu, ngpu), dtype=np.int64)
    pgn = np.empty(ngpu, dtype=np.int64)
    pord = np.empty(ngpu, dtype=np.int64)
    sc_i = np.empty((2, ngpu + 1), dtype=np.int64)
    sc_f = np.empty(ngpu + 1)
    sc_g = np.empty((4, ngpu + 1), dtype=np.int64)
    free_at = np.empty(ngpu)
    work = np.empty(ngpu)
    st = (
        (gpn, capacity, gpu_memory, room_level, demand, iters, alone, arrival, keyrank),
        (nmodes, mmem, mtib, halfseq, titer_tab, ratio, at, aj),
    )
    w = (
        (si, sf, occ, occn, mem, released, freeg, fnode),
        (running, jg, jn, titer, prog, tat, rate, ver, own),
        (pend, hd, hs, hj),
    )
    x = (mark, buf, fin, todo, started, slot_of, pj, px, pu, pg, pgn, pord, sc_i, sc_f, sc_g, free_at, work)
    ncand = cjob.shape[0]
    best_scores = np.full(ncand, math.inf)
    rollouts = 0
    events_total = 0
    hn0 = si0[HN]
    pn0 = si0[PN]
    for ci in range(ncand):
        best = math.inf
        for b in range(bases.shape[0]):
            base = bases[b]
            # the copy of the state (sim.copy())
            si[:] = si0
            sf[:] = sf0
            occ[:, : occ0.shape[1]] = occ0
            occn[:] = occn0
            mem[:] = mem0
            released[:] = released0
            for n in range(nnodes):
                fnode[n] = 0
            for g in range(ngpu):
                idle = occn[g] == 0
                freeg[g] = idle
                if idle:
                    fnode[g // gpn] += 1
            running[:] = running0
            jg[:] = jg0
            jn[:] = jn0
            titer[:] = titer0
            prog[:] = prog0
            tat[:] = tat0
            rate[:] = rate0
            ver[:] = ver0
            own[:] = own0
            pend[:pn0] = pend0[:pn0]
            hd[:hn0] = hd0
            hs[:hn0] = hs0
            hj[:hn0] = hj0
            j = cjob[ci]
            if j >= 0:
                _start(st, w, x, j, cgpus[ci], cng[ci], cmode[ci], slot, slotted)
                _drop(si, pend, j)
            elif not _next_event(st, w, x, slot, slotted):
                continue
            rollouts += 1
            # rollout
            events = 0
            sharing = base != 1 and capacity >= 2
            value = math.inf
            finished = False
            while True:
                if si[PN] and (si[FREE] or (sharing and si[NSINGLE])):
                    _base_step(st, w, x, base, slot, slotted, scan, tries)
                if events >= max_events:
                    value = _terminal(st, w, x, tail)
                    finished = True
                    break
                if not _next_event(st, w, x, slot, slotted):
                    break
                events += 1
            if not finished:
                if si[PN]:
                    value = math.inf
                elif tail:
                    acc = 0.0  # sum(released), left to right
                    for g in range(ngpu):
                        acc += released[g]
                    value = sf[TOTAL] + tail * acc
                else:
                    value = sf[TOTAL] + 0.0
            events_total += events
            if value < best:
                best = value
        best_scores[ci] = best
    return best_scores, rollouts, events_total
