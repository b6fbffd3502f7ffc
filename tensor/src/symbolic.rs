//! Index arithmetic for kernels: linear combinations of atoms (the work-item's output index,
//! loop variables, quotients and remainders by constants) with enough simplification that
//! views compose without a division per dimension.
//!
//! Every value is non-negative on the lanes that use it: a pad's out-of-range lanes compute
//! garbage indices that the kernel masks before any load, so simplifications only have to be
//! right on in-range lanes. Quotients and remainders are of non-negative values, so the IR's
//! unsigned division is the floor division the rules assume.

use std::collections::BTreeMap;

/// A term of a [`Lin`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Atom {
    /// The kernel's output element (`0..n`).
    Gid(i64),
    /// Loop variable `id` (`0..len`).
    Loop(u32, i64),
    /// `lin / d` (floor), `d > 1`.
    Div(Box<Lin>, i64),
    /// `lin % d`, `d > 1`.
    Rem(Box<Lin>, i64),
}

impl Atom {
    /// Inclusive range on in-range lanes.
    fn range(&self) -> (i64, i64) {
        match self {
            Atom::Gid(n) | Atom::Loop(_, n) => (0, (n - 1).max(0)),
            Atom::Div(x, d) => {
                let (lo, hi) = x.range();
                (lo.div_euclid(*d), hi.div_euclid(*d))
            }
            Atom::Rem(x, d) => {
                let (lo, hi) = x.range();
                if lo >= 0 && hi < *d {
                    (lo, hi)
                } else {
                    (0, d - 1)
                }
            }
        }
    }
}

/// `Σ coefficient · atom + constant`, terms sorted, no zero coefficient.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Lin {
    pub(crate) terms: Vec<(Atom, i64)>,
    pub(crate) c: i64,
}

impl Lin {
    /// A constant.
    pub(crate) fn konst(c: i64) -> Lin {
        Lin { terms: vec![], c }
    }

    /// One atom.
    pub(crate) fn atom(a: Atom) -> Lin {
        Lin {
            terms: vec![(a, 1)],
            c: 0,
        }
    }

    /// The output element of a kernel of `n` elements.
    pub(crate) fn gid(n: i64) -> Lin {
        Lin::atom(Atom::Gid(n))
    }

    /// Inclusive range on in-range lanes.
    pub(crate) fn range(&self) -> (i64, i64) {
        let (mut lo, mut hi) = (self.c, self.c);
        for (a, k) in &self.terms {
            let (alo, ahi) = a.range();
            if *k >= 0 {
                lo += k * alo;
                hi += k * ahi;
            } else {
                lo += k * ahi;
                hi += k * alo;
            }
        }
        (lo, hi)
    }

    fn from_map(m: BTreeMap<Atom, i64>, c: i64) -> Lin {
        let mut l = Lin {
            terms: m.into_iter().filter(|(_, k)| *k != 0).collect(),
            c,
        };
        l.recombine();
        l
    }

    /// `self + other`.
    pub(crate) fn add(&self, other: &Lin) -> Lin {
        let mut m: BTreeMap<Atom, i64> = self.terms.iter().cloned().collect();
        for (a, k) in &other.terms {
            *m.entry(a.clone()).or_insert(0) += k;
        }
        Lin::from_map(m, self.c + other.c)
    }

    /// `self + c`.
    pub(crate) fn add_const(&self, c: i64) -> Lin {
        Lin {
            terms: self.terms.clone(),
            c: self.c + c,
        }
    }

    /// `self · k`.
    pub(crate) fn mul(&self, k: i64) -> Lin {
        if k == 0 {
            return Lin::konst(0);
        }
        Lin {
            terms: self.terms.iter().map(|(a, c)| (a.clone(), c * k)).collect(),
            c: self.c * k,
        }
    }

    /// Splits `self` into `q·d + r`: the terms whose coefficients `d` divides (and the
    /// constant's multiple of `d`) go to `q`.
    fn split(&self, d: i64) -> (Lin, Lin) {
        let (mut q, mut r) = (BTreeMap::new(), BTreeMap::new());
        for (a, k) in &self.terms {
            if k % d == 0 {
                q.insert(a.clone(), k / d);
            } else {
                r.insert(a.clone(), *k);
            }
        }
        (
            Lin::from_map(q, self.c.div_euclid(d)),
            Lin::from_map(r, self.c.rem_euclid(d)),
        )
    }

    /// Splits `self` into `q·d + r` with every coefficient of `r` (and its constant) in
    /// `[0, d)`: each term `k·a` gives `(k div d)·a` to `q` and `(k mod d)·a` to `r`. Exact
    /// because atoms are non-negative on in-range lanes, so `r ≥ 0` there; what the
    /// pooling trick's indices need (`(r·(len + 1) + j) % len` is `r + j` when that is
    /// below `len`).
    fn split_mod(&self, d: i64) -> (Lin, Lin) {
        let (mut q, mut r) = (BTreeMap::new(), BTreeMap::new());
        for (a, k) in &self.terms {
            q.insert(a.clone(), k.div_euclid(d));
            r.insert(a.clone(), k.rem_euclid(d));
        }
        (
            Lin::from_map(q, self.c.div_euclid(d)),
            Lin::from_map(r, self.c.rem_euclid(d)),
        )
    }

    /// `self / d` (floor; `d ≥ 1`).
    pub(crate) fn div(&self, d: i64) -> Lin {
        if d <= 1 {
            return self.clone();
        }
        if let [(Atom::Div(x, e), 1)] = self.terms.as_slice()
            && self.c == 0
        {
            return x.div(e * d);
        }
        let (q, r) = self.split(d);
        let (lo, hi) = r.range();
        if lo >= 0 && hi < d {
            return q;
        }
        let (q2, r2) = self.split_mod(d);
        if r2.range().1 < d {
            return q2;
        }
        if lo >= 0 {
            return q.add(&Lin::atom(Atom::Div(Box::new(r), d)));
        }
        let (lo, hi) = self.range();
        if lo >= 0 && hi < d {
            return Lin::konst(0);
        }
        Lin::atom(Atom::Div(Box::new(self.clone()), d))
    }

    /// `self % d` (`d ≥ 1`).
    pub(crate) fn rem(&self, d: i64) -> Lin {
        if d <= 1 {
            return Lin::konst(0);
        }
        if let [(Atom::Rem(x, e), 1)] = self.terms.as_slice()
            && self.c == 0
            && e % d == 0
        {
            return x.rem(d);
        }
        let (_, r) = self.split(d);
        let (lo, hi) = r.range();
        if lo >= 0 && hi < d {
            return r;
        }
        let (_, r2) = self.split_mod(d);
        if r2.range().1 < d {
            return r2;
        }
        if lo >= 0 {
            return Lin::atom(Atom::Rem(Box::new(r), d));
        }
        let (lo, hi) = self.range();
        if lo >= 0 && hi < d {
            return self.clone();
        }
        Lin::atom(Atom::Rem(Box::new(self.clone()), d))
    }

    /// Folds `k·d·(x / d) + k·(x % d)` into `k·x` and `k·d·((x / d) % a) + k·(x % d)` into
    /// `k·(x % (a·d))`: what splitting an index into dimensions and joining them again
    /// produces.
    fn recombine(&mut self) {
        loop {
            let mut found = None;
            'search: for (i, (ai, ki)) in self.terms.iter().enumerate() {
                let Atom::Rem(x, d) = ai else { continue };
                for (j, (aj, kj)) in self.terms.iter().enumerate() {
                    if i == j || *kj != ki * d {
                        continue;
                    }
                    match aj {
                        Atom::Div(y, e) if y == x && e == d => {
                            found = Some((i, j, (**x).clone(), *ki));
                            break 'search;
                        }
                        Atom::Rem(inner, a) => {
                            if let [(Atom::Div(y, e), 1)] = inner.terms.as_slice()
                                && inner.c == 0
                                && y == x
                                && e == d
                            {
                                found = Some((i, j, x.rem(a * d), *ki));
                                break 'search;
                            }
                        }
                        _ => {}
                    }
                }
            }
            let Some((i, j, repl, k)) = found else { return };
            let mut rest = self.clone();
            let (hi, lo) = (i.max(j), i.min(j));
            rest.terms.remove(hi);
            rest.terms.remove(lo);
            *self = rest.add(&repl.mul(k));
        }
    }
}

/// Row-major strides of `shape`.
pub(crate) fn strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1] as i64;
    }
    s
}

/// The per-dimension indices of element `linear` of `shape` (row-major).
pub(crate) fn unflatten(linear: &Lin, shape: &[usize]) -> Vec<Lin> {
    let st = strides(shape);
    shape
        .iter()
        .zip(&st)
        .map(|(&n, &s)| linear.div(s).rem(n as i64))
        .collect()
}

/// The row-major linear index of `idx` in `shape`.
pub(crate) fn flatten(idx: &[Lin], shape: &[usize]) -> Lin {
    let st = strides(shape);
    idx.iter()
        .zip(&st)
        .fold(Lin::konst(0), |acc, (i, &s)| acc.add(&i.mul(s)))
}

/// Maps an index of a tensor of shape `to` onto the tensor of shape `from` it is a reshape
/// of: dimensions of 1 are dropped and added without arithmetic, and the rest is done in
/// groups of dimensions whose products agree.
pub(crate) fn reshape_index(idx: &[Lin], to: &[usize], from: &[usize]) -> Vec<Lin> {
    let to_nz: Vec<(usize, &Lin)> = to
        .iter()
        .zip(idx)
        .filter(|(n, _)| **n != 1)
        .map(|(n, i)| (*n, i))
        .collect();
    let from_nz: Vec<usize> = from.iter().copied().filter(|n| *n != 1).collect();
    let mut out_nz: Vec<Lin> = Vec::with_capacity(from_nz.len());
    let (mut a, mut b) = (0usize, 0usize);
    while a < to_nz.len() || b < from_nz.len() {
        // One group: the shortest runs of each side with equal products.
        let (a0, b0) = (a, b);
        let (mut pa, mut pb) = (1usize, 1usize);
        loop {
            if pa <= pb && a < to_nz.len() {
                pa *= to_nz[a].0;
                a += 1;
            } else if b < from_nz.len() {
                pb *= from_nz[b];
                b += 1;
            } else if a < to_nz.len() {
                pa *= to_nz[a].0;
                a += 1;
            } else {
                break;
            }
            if pa == pb && a > a0 && b > b0 {
                break;
            }
        }
        let shape_a: Vec<usize> = to_nz[a0..a].iter().map(|(n, _)| *n).collect();
        let idx_a: Vec<Lin> = to_nz[a0..a].iter().map(|(_, i)| (*i).clone()).collect();
        let linear = flatten(&idx_a, &shape_a);
        out_nz.extend(unflatten(&linear, &from_nz[b0..b]));
    }
    let mut it = out_nz.into_iter();
    from.iter()
        .map(|&n| {
            if n == 1 {
                Lin::konst(0)
            } else {
                it.next().unwrap_or_else(|| Lin::konst(0))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(l: &Lin, gid: i64) -> i64 {
        fn atom(a: &Atom, gid: i64) -> i64 {
            match a {
                Atom::Gid(_) => gid,
                Atom::Loop(..) => 0,
                Atom::Div(x, d) => eval(x, gid).div_euclid(*d),
                Atom::Rem(x, d) => eval(x, gid).rem_euclid(*d),
            }
        }
        l.terms.iter().map(|(a, k)| k * atom(a, gid)).sum::<i64>() + l.c
    }

    #[test]
    fn splitting_and_joining_dimensions_gives_back_the_index() {
        let g = Lin::gid(24);
        let idx = unflatten(&g, &[2, 3, 4]);
        assert_eq!(flatten(&idx, &[2, 3, 4]), g);
        // A reshape of a contiguous index is the index.
        let r = reshape_index(&idx, &[2, 3, 4], &[6, 4]);
        assert_eq!(flatten(&r, &[6, 4]), g);
        let r = reshape_index(&idx, &[2, 3, 4], &[24]);
        assert_eq!(r, vec![g.clone()]);
    }

    #[test]
    fn reshapes_map_every_element_where_it_belongs() {
        let cases: [(&[usize], &[usize]); 5] = [
            (&[2, 3, 4], &[4, 6]),
            (&[6, 4], &[2, 12]),
            (&[1, 5, 1, 2], &[10]),
            (&[3, 4, 5], &[5, 3, 4]),
            (&[12], &[2, 1, 6]),
        ];
        for (to, from) in cases {
            let n: usize = to.iter().product();
            let g = Lin::gid(n as i64);
            let idx = unflatten(&g, to);
            let mapped = flatten(&reshape_index(&idx, to, from), from);
            for e in 0..n as i64 {
                assert_eq!(eval(&mapped, e), e, "{to:?} -> {from:?} element {e}");
            }
        }
    }

    #[test]
    fn quotients_and_remainders_simplify_by_range() {
        let g = Lin::gid(10);
        assert_eq!(g.rem(10), g);
        assert_eq!(g.div(10), Lin::konst(0));
        assert_eq!(g.mul(4).add_const(3).div(4), g);
        assert_eq!(g.mul(4).add_const(3).rem(4), Lin::konst(3));
        // Coefficients reduced modulo the divisor: the pooling trick's rows one longer than
        // the input (`r·11 + j` over rows of 10) with r + j below 10.
        let r = Lin::atom(Atom::Loop(0, 3));
        let j = Lin::atom(Atom::Loop(1, 8));
        let x = r.mul(11).add(&j);
        assert_eq!(x.rem(10), r.add(&j));
        assert_eq!(x.div(10), r);
        let env = |l: &Lin, rv: i64, jv: i64| {
            fn ev(l: &Lin, rv: i64, jv: i64) -> i64 {
                l.terms
                    .iter()
                    .map(|(a, k)| {
                        k * match a {
                            Atom::Loop(0, _) => rv,
                            Atom::Loop(..) => jv,
                            Atom::Div(x, d) => ev(x, rv, jv).div_euclid(*d),
                            Atom::Rem(x, d) => ev(x, rv, jv).rem_euclid(*d),
                            Atom::Gid(_) => 0,
                        }
                    })
                    .sum::<i64>()
                    + l.c
            }
            ev(l, rv, jv)
        };
        // And where they do not vanish, still right: `(r·7 + j + 3) / 5` and `% 5`.
        let y = r.mul(7).add(&j).add_const(3);
        for rv in 0..3 {
            for jv in 0..8 {
                let v = 7 * rv + jv + 3;
                assert_eq!(env(&y.div(5), rv, jv), v / 5);
                assert_eq!(env(&y.rem(5), rv, jv), v % 5);
            }
        }
        // Not simplifiable: kept, and right.
        let x = g.mul(3).add_const(1).div(4);
        for e in 0..10 {
            assert_eq!(eval(&x, e), (3 * e + 1) / 4);
        }
    }
}
