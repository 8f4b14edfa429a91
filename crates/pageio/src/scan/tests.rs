use super::*;

/// `[10, 20]` on int4 keys.
struct Ten;
impl KeyRange for Ten {
    fn below(&self, key: &Datum<'_>) -> bool {
        matches!(key, Datum::Int4(v) if *v < 10)
    }
    fn above(&self, key: &Datum<'_>) -> bool {
        matches!(key, Datum::Int4(v) if *v > 20)
    }
    fn matches(&self, key: &Datum<'_>) -> bool {
        !self.below(key) && !self.above(key)
    }
}

/// Every key, NULL included: a full index scan.
struct All;
impl KeyRange for All {
    fn below(&self, _: &Datum<'_>) -> bool {
        false
    }
    fn above(&self, _: &Datum<'_>) -> bool {
        false
    }
    fn matches(&self, _: &Datum<'_>) -> bool {
        true
    }
    fn admits_null(&self) -> bool {
        true
    }
}

#[test]
fn keys_are_placed_in_the_index_order() {
    let order = |descending, nulls_first| KeyOrder {
        descending,
        nulls_first,
    };
    let (low, mid, high) = (Datum::Int4(5), Datum::Int4(15), Datum::Int4(25));
    let place = |o: KeyOrder, k: Option<&Datum<'_>>| o.place(&Ten, k);
    // ASC (NULLS LAST, the default): 5 before, 15 in, 25 after, NULL after.
    let asc = KeyOrder::default();
    assert_eq!(place(asc, Some(&low)), Place::Before);
    assert_eq!(place(asc, Some(&mid)), Place::Within);
    assert_eq!(place(asc, Some(&high)), Place::After);
    assert_eq!(place(asc, None), Place::After);
    // ASC NULLS FIRST: NULL before everything.
    assert_eq!(place(order(false, true), None), Place::Before);
    // DESC (NULLS FIRST): the largest first, so 25 comes before the range, 5 after it.
    let desc = order(true, true);
    assert_eq!(place(desc, Some(&high)), Place::Before);
    assert_eq!(place(desc, Some(&mid)), Place::Within);
    assert_eq!(place(desc, Some(&low)), Place::After);
    assert_eq!(place(desc, None), Place::Before);
    // DESC NULLS LAST.
    assert_eq!(place(order(true, false), None), Place::After);
    // A range without bounds holds NULL keys wherever they sort.
    for o in [asc, desc, order(false, true), order(true, false)] {
        assert_eq!(o.place(&All, None), Place::Within);
        assert_eq!(o.place(&All, Some(&high)), Place::Within);
    }
}
