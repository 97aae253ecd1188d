"""Reference RDP values of the Poisson-subsampled Gaussian mechanism by direct numerical integration.

The accountant (privacy/rdp_accountant.cc) evaluates A_alpha by the series of Mironov, Talwar and Zhang
(2019). This script evaluates the definition instead, with mpmath at 50 significant digits:

    A_alpha = integral over z of mu0(z) * (mu(z) / mu0(z)) ** alpha,
    mu0 = N(0, sigma^2),  mu = (1 - q) N(0, sigma^2) + q N(1, sigma^2),
    RDP(alpha) = log(A_alpha) / (alpha - 1),

so that an error in the series (a term, a sign, a cut-off) shows as a disagreement. Its output is the
table in tests/privacy/rdp_accountant_test.cc ("the series agrees with direct integration").

Example:
    $ python3 tests/privacy/reference/make_sampled_gaussian_reference.py
    {0.0042666666666666667, 1.1, 8.1, 9.96597276193112e-5},
    ...
"""
from typing import List, Tuple

import mpmath
from mpmath import mp

mp.dps = 50

# (q, sigma, alpha): realistic DP-SGD settings, integer and fractional orders, and both ends of q and sigma.
CASES: List[Tuple[mpmath.mpf, mpmath.mpf, mpmath.mpf]] = [
    (mp.mpf(256) / 60000, mp.mpf("1.1"), mp.mpf("8.1")),
    (mp.mpf(256) / 60000, mp.mpf("1.1"), mp.mpf(13)),
    (mp.mpf("0.04"), mp.mpf("1.5"), mp.mpf("3.9")),
    (mp.mpf("0.01"), mp.mpf("2.5"), mp.mpf(50)),
    (mp.mpf("0.001"), mp.mpf(1), mp.mpf(2)),
    (mp.mpf("0.0001"), mp.mpf(1), mp.mpf("1.5")),
    (mp.mpf("0.01"), mp.mpf(10), mp.mpf(20)),
    (mp.mpf("0.1"), mp.mpf(100), mp.mpf("20.5")),
    (mp.mpf("0.1"), mp.mpf(2), mp.mpf(5)),
    (mp.mpf("0.5"), mp.mpf("0.8"), mp.mpf("2.5")),
    (mp.mpf("0.3"), mp.mpf("0.5"), mp.mpf("1.1")),
    (mp.mpf("0.9"), mp.mpf("3"), mp.mpf("10.9")),
]


def rdp_by_integration(q: mpmath.mpf, sigma: mpmath.mpf, alpha: mpmath.mpf) -> mpmath.mpf:
    """RDP at order ``alpha`` of one step, from the definition of A_alpha by quadrature.

    Example:
        >>> float(rdp_by_integration(mp.mpf(1), mp.mpf(2), mp.mpf(3)))  # q = 1: alpha / (2 sigma^2)
        0.375
    """

    def integrand(z: mpmath.mpf) -> mpmath.mpf:
        mu0 = mpmath.npdf(z, 0, sigma)
        ratio = (1 - q) + q * mpmath.exp((2 * z - 1) / (2 * sigma**2))  # mu / mu0
        return mu0 * ratio**alpha

    # The integrand's mass lies near 0 and near the shifted mean alpha (for small sigma, far out): split the
    # line there so that the quadrature sees every peak.
    points = sorted({-mpmath.inf, -20 * sigma, mp.mpf(0), mp.mpf("0.5"), mp.mpf(1), alpha, alpha + 20 * sigma,
                     mpmath.inf})
    a_alpha = mpmath.quad(integrand, points, maxdegree=10)
    return mpmath.log(a_alpha) / (alpha - 1)


def main() -> None:
    """Prints one C++ initializer per case: {q, sigma, alpha, rdp}."""
    for q, sigma, alpha in CASES:
        rdp = rdp_by_integration(q, sigma, alpha)
        print("{%s, %s, %s, %s}," % (mpmath.nstr(q, 17), mpmath.nstr(sigma, 17), mpmath.nstr(alpha, 17),
                                      mpmath.nstr(rdp, 15)))


if __name__ == "__main__":
    main()
