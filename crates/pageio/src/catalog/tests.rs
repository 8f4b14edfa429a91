use super::{array_single_element, vector_values};

/// An `int2vector` payload (header excluded) of `values`.
fn int2vector(values: &[i16]) -> Vec<u8> {
    let mut v = Vec::new();
    for x in [1i32, 0, 21, values.len() as i32, 0] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    for x in values {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v
}

#[test]
fn index_vectors_decode_and_garbage_is_an_error() {
    assert_eq!(vector_values(&int2vector(&[3, 0]), 2).unwrap(), [3, 0]);
    assert_eq!(
        vector_values(&int2vector(&[]), 2).unwrap(),
        Vec::<u64>::new()
    );
    let mut oids = int2vector(&[]);
    oids[12..16].copy_from_slice(&2i32.to_le_bytes());
    oids.extend_from_slice(&950u32.to_le_bytes());
    oids.extend_from_slice(&100u32.to_le_bytes());
    assert_eq!(vector_values(&oids, 4).unwrap(), [950, 100]);
    // Too many values claimed, a null bitmap, two dimensions, a negative count.
    let mut long = int2vector(&[1]);
    long[12..16].copy_from_slice(&9i32.to_le_bytes());
    assert!(vector_values(&long, 2).is_err());
    let mut nulls = int2vector(&[1]);
    nulls[4..8].copy_from_slice(&28i32.to_le_bytes());
    assert!(vector_values(&nulls, 2).is_err());
    let mut two = int2vector(&[1]);
    two[0..4].copy_from_slice(&2i32.to_le_bytes());
    assert!(vector_values(&two, 2).is_err());
    let mut negative = int2vector(&[1]);
    negative[12..16].copy_from_slice(&(-1i32).to_le_bytes());
    assert!(vector_values(&negative, 2).is_err());
    for len in 0..48 {
        let _ = vector_values(&vec![0xFF; len], 2);
        let _ = vector_values(&vec![0x01; len], 4);
    }
}

/// A one-dimensional array payload (header excluded): ndim, dataoffset, elemtype, dims,
/// lbound, an optional null bitmap, then `data` at the MAXALIGNed data start.
fn array(ndim: i32, dim: i32, bitmap: Option<u8>, data: &[u8]) -> Vec<u8> {
    let dataoffset = if bitmap.is_some() { 32 } else { 0 };
    let mut a = Vec::new();
    for v in [ndim, dataoffset, 23, dim, 1] {
        a.extend_from_slice(&v.to_le_bytes());
    }
    if let Some(b) = bitmap {
        a.push(b);
    }
    let start = if bitmap.is_some() { 32 } else { 24 } - 4;
    a.resize(start, 0);
    a.extend_from_slice(data);
    a
}

#[test]
fn missing_values_decode_from_one_element_arrays() {
    let four = 7i32.to_le_bytes();
    assert_eq!(
        array_single_element(&array(1, 1, None, &four), 4).unwrap(),
        Some(four.to_vec())
    );
    assert_eq!(
        array_single_element(&array(1, 1, Some(1), &four), 4).unwrap(),
        Some(four.to_vec())
    );
    assert_eq!(
        array_single_element(&array(1, 1, Some(0), &[]), 4).unwrap(),
        None
    );
    let text = [(4 << 1) | 1, b'a', b'b', b'c'];
    assert_eq!(
        array_single_element(&array(1, 1, None, &text), -1).unwrap(),
        Some(text.to_vec())
    );
}

#[test]
fn malformed_arrays_are_errors_not_panics() {
    let four = 7i32.to_le_bytes();
    let err = array_single_element(&array(2, 1, None, &four), 4).unwrap_err();
    assert!(err.contains("2 dimensions"), "{err}");
    let err = array_single_element(&array(99, 1, None, &four), 4).unwrap_err();
    assert!(err.contains("claims 99 dimensions"), "{err}");
    let err = array_single_element(&array(1, 3, None, &four), 4).unwrap_err();
    assert!(err.contains("3 elements"), "{err}");
    let err = array_single_element(&array(1, 1, None, &four[..2]), 4).unwrap_err();
    assert!(err.contains("runs past the array"), "{err}");
    let err = array_single_element(&four, 4).unwrap_err();
    assert!(err.contains("truncated"), "{err}");
    let err = array_single_element(&array(1, 1, None, &[(60 << 1) | 1]), -1).unwrap_err();
    assert!(err.contains("claims 60 bytes"), "{err}");
    for len in 0..40 {
        let _ = array_single_element(&vec![0xFF; len], -1);
        let _ = array_single_element(&vec![0x01; len], -2);
    }
}
