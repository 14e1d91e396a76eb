//! XPathMark-style query sets on XMark documents: the deep-focused (D) and non
//! deep-focused (N) queries of the chapter's Table 2.5, and the interleavings of its
//! Table 2.8 (disjoint δ and intersecting π groups; the chapter's last two intersecting
//! non deep-focused groups are illegible in our copy and are left out).

/// Deep-focused queries: they read whole subtrees.
pub const DEEP: [(&str, &str); 9] = [
    (
        "D1",
        "/site/closed_auctions/closed_auction/annotation/description/parlist/listitem/text/keyword",
    ),
    ("D2", "/site/people/person/watches"),
    (
        "D3",
        "/site/open_auctions/open_auction/annotation/description/text/keyword",
    ),
    ("D4", "/site/people/person/address/country"),
    ("D5", "/site/regions/australia/item/description/text/emph"),
    ("D6", "/site/people/person/*/business"),
    ("D7", "/site/closed_auctions/closed_auction/*/description"),
    ("D8", "/site/regions/*/item/description/text"),
    ("D9", "/site/closed_auctions//itemref"),
];

/// Non deep-focused queries: they walk siblings.
pub const NON_DEEP: [(&str, &str); 9] = [
    ("N1", "/site/open_auctions/open_auction"),
    ("N2", "/site/closed_auctions"),
    ("N3", "/site/regions/australia"),
    ("N4", "/site/closed_auctions/closed_auction"),
    ("N5", "/site/regions/*/item"),
    ("N6", "/site/*/australia"),
    (
        "N7",
        "/site/open_auctions/open_auction[@id='open_auction0']/bidder",
    ),
    (
        "N8",
        "/site/regions/asia/item[@id='item4']/mailbox/mail/from",
    ),
    (
        "N9",
        "/site/open_auctions/open_auction[@id='open_auction0']//keyword",
    ),
];

/// Table 2.8: interleaved query groups, by query name.
pub const INTERLEAVED: [(&str, &[&str]); 14] = [
    ("delta1-D", &["D1", "D4"]),
    ("delta2-D", &["D4", "D8"]),
    ("delta3-D", &["D5", "D7"]),
    ("delta4-D", &["D1", "D4", "D5"]),
    ("delta5-D", &["D4", "D5", "D7"]),
    ("delta6-D", &["D4", "D5", "D9"]),
    ("pi1-D", &["D1", "D7"]),
    ("pi2-D", &["D2", "D4"]),
    ("delta1-N", &["N1", "N4"]),
    ("delta2-N", &["N4", "N8"]),
    ("delta3-N", &["N5", "N7"]),
    ("delta4-N", &["N1", "N4", "N5"]),
    ("pi1-N", &["N1", "N6"]),
    ("pi2-N", &["N5", "N6"]),
];

/// Names of the sets `--query-set` accepts.
pub const SET_NAMES: &str = "xpathmark, deep, non-deep";

/// The (name, query) pairs of a named set.
pub fn set(name: &str) -> Option<Vec<(&'static str, &'static str)>> {
    match name {
        "xpathmark" => Some(DEEP.iter().chain(NON_DEEP.iter()).copied().collect()),
        "deep" => Some(DEEP.to_vec()),
        "non-deep" => Some(NON_DEEP.to_vec()),
        _ => None,
    }
}
