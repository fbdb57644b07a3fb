//! Checks that a comparator is a total order, for the property tests of every sort in klab.
//!
//! Rust's sorts may panic ("user-provided comparison function does not correctly implement a total
//! order") or return garbage when a comparator is not antisymmetric and transitive, so every
//! comparator that orders pods, ReplicaSets, nodes or queue entries is tested with
//! [`check_total_order`] on random inputs: equal timestamps, missing fields, colliding names.

use std::cmp::Ordering;

/// `Err` with a description of the first violation of a total order by `cmp` over `items`:
/// reflexivity (`a == a`), antisymmetry (`cmp(a, b) == cmp(b, a).reverse()`), transitivity of
/// `<=` and of `==` over every triple, and a sort of `items` that `cmp` agrees is sorted. Cubic in
/// `items.len()`: keep inputs to a few dozen elements.
pub fn check_total_order<T: std::fmt::Debug>(
    items: &[T],
    cmp: impl Fn(&T, &T) -> Ordering,
) -> Result<(), String> {
    for (i, a) in items.iter().enumerate() {
        if cmp(a, a) != Ordering::Equal {
            return Err(format!("not reflexive: {a:?} != itself"));
        }
        for b in &items[i..] {
            let (ab, ba) = (cmp(a, b), cmp(b, a));
            if ab != ba.reverse() {
                return Err(format!(
                    "not antisymmetric: {a:?} vs {b:?} is {ab:?}, the reverse is {ba:?}"
                ));
            }
        }
    }
    for a in items {
        for b in items {
            let ab = cmp(a, b);
            if ab == Ordering::Greater {
                continue;
            }
            for c in items {
                let bc = cmp(b, c);
                if bc == Ordering::Greater {
                    continue;
                }
                let ac = cmp(a, c);
                let want = if ab == Ordering::Equal && bc == Ordering::Equal {
                    Ordering::Equal
                } else {
                    Ordering::Less
                };
                if ac != want {
                    return Err(format!(
                        "not transitive: {a:?} {ab:?} {b:?} {bc:?} {c:?} but {a:?} {ac:?} {c:?}"
                    ));
                }
            }
        }
    }
    let mut sorted: Vec<&T> = items.iter().collect();
    sorted.sort_by(|a, b| cmp(a, b));
    if let Some(w) = sorted
        .windows(2)
        .find(|w| cmp(w[0], w[1]) == Ordering::Greater)
    {
        return Err(format!("sorted out of order: {:?} before {:?}", w[0], w[1]));
    }
    Ok(())
}

/// Whether `a` and `b` are the same sequence up to elements that `cmp` finds equal: what sorting
/// two permutations of one input with a total order must give.
pub fn same_order<T>(a: &[T], b: &[T], cmp: impl Fn(&T, &T) -> Ordering) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| cmp(x, y) == Ordering::Equal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_total_orders_and_names_the_broken_ones() {
        let v = [3, 1, 2, 2, 5];
        assert_eq!(check_total_order(&v, |a, b| a.cmp(b)), Ok(()));
        assert_eq!(
            check_total_order(&v, |a: &i32, b| (a % 2).cmp(&(b % 2))),
            Ok(())
        );
        // Not antisymmetric: everything is less than everything else.
        let e = check_total_order(&v, |_, _| Ordering::Less).unwrap_err();
        assert!(e.contains("reflexive"), "{e}");
        // Rock-paper-scissors: antisymmetric but cyclic.
        let rps = |a: &i32, b: &i32| match (a - b).rem_euclid(3) {
            0 => Ordering::Equal,
            1 => Ordering::Greater,
            _ => Ordering::Less,
        };
        let e = check_total_order(&[0, 1, 2], rps).unwrap_err();
        assert!(e.contains("transitive"), "{e}");
        // Floats: partial_cmp is not total with NaN, total_cmp is.
        let f = [1.0, f64::NAN, 0.5, -0.0, 0.0];
        assert!(check_total_order(&f, |a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal)).is_err());
        assert_eq!(check_total_order(&f, |a, b| a.total_cmp(b)), Ok(()));
        assert!(same_order(&[1, 2], &[1, 2], |a, b| a.cmp(b)));
        assert!(!same_order(&[1, 2], &[2, 1], |a, b| a.cmp(b)));
    }
}
