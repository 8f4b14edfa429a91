//! Every varlena header form, hand-built byte by byte, plus truncated and malformed inputs.

use pageio::page::varlena::{encode_bytes, CompressionMethod, Varlena, VARTAG_ONDISK};
use pageio::page::PageError;

#[test]
fn short_header() {
    // 0x0B = 11 → odd → short; length 5 including the header.
    let bytes = [0x0B, b'a', b'b', b'c', b'd', 0xEE];
    let (v, size) = Varlena::decode(&bytes).unwrap();
    assert_eq!(size, 5);
    assert_eq!(v, Varlena::Inline(b"abcd"));
    assert_eq!(v.octet_length(), 4);
    assert!(!v.is_compressed());
}

#[test]
fn empty_short_value() {
    let (v, size) = Varlena::decode(&[0x03]).unwrap();
    assert_eq!((v, size), (Varlena::Inline(b""), 1));
    assert_eq!(encode_bytes(b"").unwrap(), vec![0x03]);
}

#[test]
fn four_byte_header() {
    let payload = vec![b'x'; 200];
    let mut bytes = ((204u32) << 2).to_le_bytes().to_vec();
    bytes.extend_from_slice(&payload);
    bytes.extend_from_slice(&[1, 2, 3]);
    let (v, size) = Varlena::decode(&bytes).unwrap();
    assert_eq!(size, 204);
    assert_eq!(v, Varlena::Inline(&payload[..]));
    assert_eq!(v.octet_length(), 200);
}

#[test]
fn inline_compressed() {
    let data = [9u8, 8, 7, 6, 5];
    let total = 4 + 4 + data.len() as u32;
    let mut bytes = ((total << 2) | 0x02).to_le_bytes().to_vec();
    // raw size 1000, method 1 (lz4) in the top two bits.
    bytes.extend_from_slice(&(1000u32 | (1 << 30)).to_le_bytes());
    bytes.extend_from_slice(&data);
    let (v, size) = Varlena::decode(&bytes).unwrap();
    assert_eq!(size, total as usize);
    assert_eq!(
        v,
        Varlena::Compressed {
            raw_size_bytes: 1000,
            method: CompressionMethod::Lz4,
            data: &data
        }
    );
    // SQL octet_length reports the decompressed size.
    assert_eq!(v.octet_length(), 1000);
    assert!(v.is_compressed());
    let mut again = Vec::new();
    v.encode(&mut again).unwrap();
    assert_eq!(again, bytes);
}

#[test]
fn external_toast_pointer() {
    let mut bytes = vec![0x01, VARTAG_ONDISK];
    bytes.extend_from_slice(&100_004i32.to_le_bytes()); // va_rawsize incl. header
    bytes.extend_from_slice(&40_000u32.to_le_bytes()); // method 0 (pglz) in the top bits
    bytes.extend_from_slice(&16_500u32.to_le_bytes()); // va_valueid
    bytes.extend_from_slice(&16_390u32.to_le_bytes()); // va_toastrelid
    let (v, size) = Varlena::decode(&bytes).unwrap();
    assert_eq!(size, 18);
    assert_eq!(
        v,
        Varlena::External {
            raw_size_bytes: 100_004,
            ext_size_bytes: 40_000,
            method: CompressionMethod::Pglz,
            value_id: 16_500,
            toast_relid: 16_390
        }
    );
    assert_eq!(v.octet_length(), 100_000);
    assert!(v.is_compressed());
    let mut again = Vec::new();
    v.encode(&mut again).unwrap();
    assert_eq!(again, bytes);

    // Uncompressed external value: ext size == raw size − header.
    let mut plain = bytes.clone();
    plain[6..10].copy_from_slice(&100_000u32.to_le_bytes());
    assert!(!Varlena::decode(&plain).unwrap().0.is_compressed());
}

#[test]
fn in_memory_pointers_are_rejected() {
    for tag in [1u8, 2, 3, 99] {
        let bytes = [0x01, tag, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(matches!(
            Varlena::decode(&bytes),
            Err(PageError::BadVarlena { .. })
        ));
    }
}

#[test]
fn truncated_inputs_are_errors() {
    let cases: &[&[u8]] = &[
        &[],                          // nothing
        &[0x0B, b'a', b'b'],          // short header claims 5
        &[0x01],                      // TOAST pointer without vartag
        &[0x01, VARTAG_ONDISK, 0, 0], // TOAST pointer cut short
        &[0x40, 0x00],                // 4-byte header cut short
        &[0x40, 0x03, 0, 0, 1, 2],    // 4-byte header claims 208
        &[0x08, 0, 0, 0],             // 4-byte header length 2 < 4
        &[0x12, 0, 0, 0, 0],          // compressed with length 4 < 8
    ];
    for case in cases {
        let result = Varlena::decode(case);
        assert!(
            matches!(result, Err(PageError::BadVarlena { .. })),
            "{case:?} gave {result:?}"
        );
    }
}

#[test]
fn encoder_picks_short_header_up_to_127_bytes() {
    let at_limit = vec![b'z'; 126];
    let encoded = encode_bytes(&at_limit).unwrap();
    assert_eq!(encoded.len(), 127);
    assert_eq!(encoded[0], (127 << 1) | 1);

    let over = vec![b'z'; 127];
    let encoded = encode_bytes(&over).unwrap();
    assert_eq!(encoded.len(), 131);
    assert_eq!(
        u32::from_le_bytes(encoded[..4].try_into().unwrap()),
        131 << 2
    );

    for len in [0usize, 1, 63, 126, 127, 128, 1000] {
        let payload = vec![7u8; len];
        let encoded = encode_bytes(&payload).unwrap();
        let (v, size) = Varlena::decode(&encoded).unwrap();
        assert_eq!(size, encoded.len());
        assert_eq!(v.inline_bytes(), Some(&payload[..]));
    }
}
