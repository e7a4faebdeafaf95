#!/usr/bin/env python3
"""Reference values for model/so3.h, computed independently with sympy; JSON on stdout.

Run with Debian's /usr/bin/python3 (python3-sympy). tests/model/test_so3.cpp compares the C++
values with these. Conventions (the same as model/so3.h, written out again here):
- complex harmonics Y_l^m: sympy's Ynm (Condon-Shortley phase), of the polar angles of the cyclic
  permutation (z, x, y) of the unit vector (x, y, z): theta = acos(y), phi = atan2(x, z);
- real harmonics: U Y_l, with U row m > 0: (Y^-m + (-1)^m Y^m) / sqrt(2), m = 0: Y^0,
  m < 0: i (Y^m - (-1)^m Y^-m) / sqrt(2); times sqrt(4 pi) (component normalisation);
- real coupling: phase * sum_m conj(U1[a, m1]) conj(U2[b, m2]) U3[c, m3] <l1 m1 l2 m2 | l3 m3>,
  phase 1 for l1 + l2 + l3 even and -i for odd.
"""
import cmath
import json
import math
import sys

try:
    import sympy
    from sympy.physics.wigner import clebsch_gordan
except ImportError:
    sys.exit("so3_reference.py: sympy is missing; install python3-sympy (jobs/install_deps.sh)")

L_MAX = 3
# Triples above L_MAX whose complex coefficients are compared too (Racah's formula up to l = 6).
HIGH_TRIPLES = [(6, 6, 6), (5, 6, 3), (6, 4, 2), (3, 3, 6), (6, 6, 0)]
POINTS = [(0.3, -0.5, 0.8), (-0.9, 0.1, 0.2), (0.0, 0.0, 1.0), (0.0, 1.0, 0.0), (1.0, 0.0, 0.0),
          (-0.2, -0.7, -0.4), (0.6, 0.6, -0.5)]


def cg(l1, m1, l2, m2, l3, m3):
    return float(clebsch_gordan(l1, l2, l3, m1, m2, m3))


def unitary(l):
    """U[(l + m)][(l + mc)]: row the real index m, column the complex m."""
    n = 2 * l + 1
    u = [[0j] * n for _ in range(n)]
    u[l][l] = 1.0
    h = 1.0 / math.sqrt(2.0)
    for m in range(1, l + 1):
        sign = (-1) ** m
        u[l + m][l - m] = h
        u[l + m][l + m] = sign * h
        u[l - m][l - m] = 1j * h
        u[l - m][l + m] = -sign * 1j * h
    return u


def triangle(l1, l2, l3):
    return abs(l1 - l2) <= l3 <= l1 + l2


def real_coupling(l1, l2, l3):
    u1, u2, u3 = unitary(l1), unitary(l2), unitary(l3)
    phase = -1j if (l1 + l2 + l3) % 2 else 1.0
    values, rest = [], 0.0
    for a in range(2 * l1 + 1):
        for b in range(2 * l2 + 1):
            for c in range(2 * l3 + 1):
                s = 0j
                for m1 in range(-l1, l1 + 1):
                    for m2 in range(-l2, l2 + 1):
                        m3 = m1 + m2
                        if abs(m3) > l3:
                            continue
                        s += (u1[a][l1 + m1].conjugate() * u2[b][l2 + m2].conjugate() *
                              u3[c][l3 + m3] * cg(l1, m1, l2, m2, l3, m3))
                s *= phase
                rest = max(rest, abs(s.imag))
                values.append(s.real)
    if rest > 1e-14:
        sys.exit(f"so3_reference.py: coupling {(l1, l2, l3)} not real after its phase ({rest})")
    return values


def real_harmonics(l, r):
    norm = math.sqrt(sum(v * v for v in r))
    x, y, z = (v / norm for v in r)
    theta, phi = math.acos(max(-1.0, min(1.0, y))), math.atan2(x, z)
    th, ph = sympy.Symbol("theta"), sympy.Symbol("phi")
    ylm = [complex(sympy.Ynm(l, m, th, ph).expand(func=True).subs({th: theta, ph: phi}).evalf(30))
           for m in range(-l, l + 1)]
    u = unitary(l)
    out = []
    for a in range(2 * l + 1):
        s = sum(u[a][k] * ylm[k] for k in range(2 * l + 1)) * math.sqrt(4 * math.pi)
        if abs(s.imag) > 1e-13:
            sys.exit(f"so3_reference.py: real harmonic l={l} at {r} not real ({s})")
        out.append(s.real)
    return out


def main():
    triples = [(l1, l2, l3) for l1 in range(L_MAX + 1) for l2 in range(L_MAX + 1)
               for l3 in range(L_MAX + 1) if triangle(l1, l2, l3)]
    cgs = []
    for (l1, l2, l3) in triples + HIGH_TRIPLES:
        for m1 in range(-l1, l1 + 1):
            for m2 in range(-l2, l2 + 1):
                if abs(m1 + m2) <= l3:
                    cgs.append([l1, m1, l2, m2, l3, m1 + m2, cg(l1, m1, l2, m2, l3, m1 + m2)])
    coupling = [{"l": list(t), "values": real_coupling(*t)} for t in triples]
    harmonics = [{"r": list(r), "l": l, "values": real_harmonics(l, r)}
                 for r in POINTS for l in range(L_MAX + 1)]
    json.dump({"clebsch_gordan": cgs, "coupling": coupling, "harmonics": harmonics},
              sys.stdout)


if __name__ == "__main__":
    main()
