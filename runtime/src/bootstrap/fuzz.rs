//! Property tests of everything the bootstrap parses from the network: frames,
//! hellos, PE tables, allgather results and unique ids. Arbitrary and mutated bytes never panic
//! and never make a parser ask for more than its bound; what the encoders write reads back.

use super::node::HostId;
use super::pending::Need;
use super::rendezvous::{decode_hello, decode_table, encode_hello, encode_table, PeInfo};
use super::tcp::{decode_blobs, encode_blobs};
use super::uid::{UniqueId, SECRET_LEN};
use super::wire::{hello_need, read_frame, split_frame, write_frame, Kind, HEADER_LEN, MAX_HELLO};
use proptest::prelude::*;

fn pe_info() -> impl Strategy<Value = PeInfo> {
    (any::<u32>(), ".{0,40}", "[0-9a-f-]{0,36}", proptest::collection::vec(any::<u8>(), 0..64)).prop_map(
        |(pid, hostname, boot_id, unix_name)| PeInfo { pid, host: HostId { hostname, boot_id }, unix_name },
    )
}

/// A valid hello, as bytes on the wire (header and payload).
fn hello_frame() -> impl Strategy<Value = Vec<u8>> {
    (any::<[u8; SECRET_LEN]>(), 0usize..1 << 20, 1usize..1 << 20, pe_info()).prop_map(|(secret, rank, n, info)| {
        let uid = UniqueId { addr: "127.0.0.1:9".parse().unwrap(), secret, secret_from_pe0: false };
        let mut out = Vec::new();
        write_frame(&mut out, Kind::HELLO, 0, &encode_hello(&uid, &[9; super::uid::NONCE_LEN], rank, n, &info, &super::rendezvous::JobIdent::default())).unwrap();
        out
    })
}

/// `bytes` with some bytes replaced, some cut off, or some appended.
fn mutated(base: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (base, proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6), any::<usize>(), proptest::collection::vec(any::<u8>(), 0..8))
        .prop_map(|(mut b, flips, cut, tail)| {
            for (at, v) in flips {
                if !b.is_empty() {
                    let i = at % b.len();
                    b[i] = v;
                }
            }
            let keep = if b.is_empty() { 0 } else { cut % (b.len() + 1) };
            if cut % 3 == 0 {
                b.truncate(keep);
            } else if cut % 3 == 1 {
                b.extend(tail);
            }
            b
        })
}

/// What PE 0 does with the first bytes of a connection: ask `hello_need` until it is done or
/// refuses, never reading past what it asked for; then split and decode.
fn pe0_reads(bytes: &[u8]) -> Result<usize, String> {
    let mut have = 0;
    loop {
        match hello_need(&bytes[..have])? {
            Need::Done => {
                let f = split_frame(&bytes[..have])?;
                decode_hello(&f.payload)?;
                return Ok(have);
            }
            Need::Total(n) => {
                assert!(n > have && n <= HEADER_LEN + MAX_HELLO, "asked for {n} bytes with {have}");
                if n > bytes.len() {
                    return Err("the stranger stopped sending".into());
                }
                have = n;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic_any_parser(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = pe0_reads(&bytes);
        let _ = read_frame(&mut &bytes[..]);
        let _ = split_frame(&bytes);
        let _ = decode_hello(&bytes);
        let _ = decode_table(&bytes, 3);
        let _ = decode_blobs(&bytes, 2);
        let _ = UniqueId::from_bytes(&bytes);
    }

    #[test]
    fn mutated_hellos_never_panic_and_stay_bounded(bytes in mutated(hello_frame())) {
        if let Ok(used) = pe0_reads(&bytes) {
            prop_assert!(used <= bytes.len() && used <= HEADER_LEN + MAX_HELLO);
        }
    }

    #[test]
    fn good_hellos_are_read_whole(bytes in hello_frame()) {
        prop_assume!(bytes.len() <= HEADER_LEN + MAX_HELLO);
        prop_assert_eq!(pe0_reads(&bytes), Ok(bytes.len()));
    }

    #[test]
    fn any_announced_length_is_refused_or_bounded(len in any::<u64>(), kind in any::<u8>()) {
        let mut h = [0u8; HEADER_LEN];
        h[..4].copy_from_slice(b"RSHB");
        h[4] = kind;
        h[12..20].copy_from_slice(&len.to_le_bytes());
        match hello_need(&h) {
            Ok(Need::Total(n)) => prop_assert!(kind == Kind::HELLO.0 && n as u64 == HEADER_LEN as u64 + len && len <= MAX_HELLO as u64),
            Ok(Need::Done) => prop_assert!(len == 0 && kind == Kind::HELLO.0),
            Err(_) => prop_assert!(kind != Kind::HELLO.0 || len > MAX_HELLO as u64),
        }
    }

    #[test]
    fn tables_and_blobs_round_trip(table in proptest::collection::vec(pe_info(), 1..6), blobs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6)) {
        prop_assert_eq!(decode_table(&encode_table(&table), table.len()).unwrap(), table.clone());
        prop_assert!(decode_table(&encode_table(&table), table.len() + 1).is_err());
        prop_assert_eq!(decode_blobs(&encode_blobs(&blobs), blobs.len()).unwrap(), blobs.clone());
        prop_assert!(decode_blobs(&encode_blobs(&blobs), blobs.len() + 1).is_err());
    }

    #[test]
    fn unique_ids_round_trip_and_mutations_never_panic(secret in any::<[u8; SECRET_LEN]>(), port in 1u16.., ip in any::<[u8; 4]>(), flip in any::<(usize, u8)>()) {
        let id = UniqueId { addr: (std::net::Ipv4Addr::from(ip), port).into(), secret, secret_from_pe0: false };
        let mut bytes = id.to_bytes();
        prop_assert_eq!(UniqueId::from_bytes(&bytes).unwrap(), id);
        let i = flip.0 % bytes.len();
        bytes[i] = flip.1;
        let _ = UniqueId::from_bytes(&bytes);
    }
}
