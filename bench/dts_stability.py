#!/usr/bin/python3
"""Where dts' exact compensation stays stable with weight-dependent gradients (docs/algorithms.md).

Models gossip/dts.cc's rule (heavy-ball momentum, window payload (W, U), correction before step s + D)
on two sites and one direction of curvature λ: site j's gradient is λ·w_j. The sites' mean follows
allreduce's momentum SGD; their difference follows the feedback loop the corrections truncate. For each
(D, P) this prints the smallest γλ on a log grid at which the difference grows (the loop's spectral
radius above 1), next to allreduce's own limit 2(1 + m).

Usage: bench/dts_stability.py [--momentum M] [D,P ...]
"""
import argparse
import math


def growth_rate(a, delay, period, m, steps=4000):
    """Mean log growth per step of the sites' difference for γλ = a (γ = 1, λ = a)."""
    w = [1.0, -1.0]
    u = [0.0, 0.0]
    window_w = [0.0, 0.0]
    window_u = [0.0, 0.0]
    pending = []  # [last step, W, U, m^(L-s), beta]
    log_scale = 0.0

    def correct(window):
        _, big_w, big_u, mpow, beta = window
        mean_w, mean_u = sum(big_w) / 2, sum(big_u) / 2
        for j in range(2):
            dw, du = mean_w - big_w[j], mean_u - big_u[j]
            w[j] -= dw + beta * du
            u[j] += mpow * du

    for k in range(steps):
        while pending and delay >= 1 and k >= delay and pending[0][0] <= k - delay:
            correct(pending.pop(0))
        for window in pending:
            window[3] *= m
            window[4] += window[3]
        for j in range(2):
            g = a * w[j]
            u[j] = m * u[j] + g
            w[j] -= u[j]
            window_u[j] = m * window_u[j] + g
            window_w[j] += window_u[j]
        if (k + 1) % period == 0:
            pending.append([k, window_w[:], window_u[:], 1.0, 0.0])
            window_w, window_u = [0.0, 0.0], [0.0, 0.0]
            if delay == 0:
                correct(pending.pop(0))
        scale = max(abs(x) for x in w + u)
        if scale > 1e10:  # the system is linear: rescale everything to keep going
            for vec in (w, u, window_w, window_u):
                vec[:] = [x / scale for x in vec]
            for window in pending:
                window[1] = [x / scale for x in window[1]]
                window[2] = [x / scale for x in window[2]]
            log_scale += math.log(scale)
    return (log_scale + math.log(max(abs(x) for x in w) + 1e-300)) / steps


def first_unstable(delay, period, m, top=3.5, points=60):
    for i in range(points):
        a = math.exp(math.log(0.002) + i * (math.log(top) - math.log(0.002)) / (points - 1))
        if growth_rate(a, delay, period, m) > 1e-3:
            return a
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("shapes", nargs="*", default=["4,1", "16,1", "4,4", "8,8", "16,16", "32,32", "2,16", "4,16",
                                                      "4,32", "8,32", "6,32", "16,64"])
    args = parser.parse_args()
    m = args.momentum
    print(f"momentum {m}: allreduce is stable up to γλ = {2 * (1 + m):.2f}")
    print("D,P  first unstable γλ (grid 0.002..3.5)")
    for shape in args.shapes:
        delay, period = (int(x) for x in shape.split(","))
        a = first_unstable(delay, period, m)
        print(f"{delay},{period}  {'stable on the grid' if a is None else f'{a:.3g}'}")


if __name__ == "__main__":
    main()
