//! An XMark-like document generator: the auction site of the XMark benchmark (regions
//! with items, categories, a category graph, people, open and closed auctions) with the
//! benchmark's element counts per scaling factor (21 750 items, 25 500 people, 12 000
//! open and 9 750 closed auctions at factor 1), its nesting (descriptions with text,
//! keywords and emphasis or lists of list items; mailboxes; bidders; annotations) and
//! its id / idref attributes, so that the XPathMark-style queries of [`crate::queries`]
//! select what they select on the real benchmark. Text is drawn from a small fixed
//! vocabulary with a deterministic generator (same factor and seed, same document);
//! text lengths are set so that nodes average the ~26 bytes of the chapter's Table 2.4.
//! The public xmlgen served as the reference for structure and counts; it is not copied.

use std::fmt::Write;

const WORDS: &[&str] = &[
    "gold", "silver", "ship", "honest", "lord", "sweet", "night", "fair", "heart", "king", "time",
    "love", "true", "noble", "death", "eyes", "duke", "word", "grace", "blood", "speak", "fortune",
    "mind", "sir", "hand", "soul", "day", "light", "queen", "good",
];
const REGIONS: [(&str, u64); 6] = [
    ("africa", 550),
    ("asia", 2000),
    ("australia", 2200),
    ("europe", 6000),
    ("namerica", 10000),
    ("samerica", 1000),
];
const CATEGORIES: u64 = 1000;
const PEOPLE: u64 = 25500;
const OPEN_AUCTIONS: u64 = 12000;
const CLOSED_AUCTIONS: u64 = 9750;

/// Deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

struct Gen {
    out: String,
    rng: Rng,
    items: u64,
    people: u64,
    open: u64,
}

fn scaled(n: u64, factor: f64) -> u64 {
    ((n as f64 * factor).round() as u64).max(1)
}

impl Gen {
    fn words(&mut self, n: u64) {
        for i in 0..n {
            if i > 0 {
                self.out.push(' ');
            }
            let w = WORDS[self.rng.below(WORDS.len() as u64) as usize];
            self.out.push_str(w);
        }
    }
    fn leaf(&mut self, tag: &str, words: u64) {
        let _ = write!(self.out, "<{tag}>");
        self.words(words);
        let _ = write!(self.out, "</{tag}>");
    }
    fn leaf_text(&mut self, tag: &str, text: &str) {
        let _ = write!(self.out, "<{tag}>{text}</{tag}>");
    }
    fn date(&mut self, tag: &str) {
        let (m, d, y) = (
            1 + self.rng.below(12),
            1 + self.rng.below(28),
            1998 + self.rng.below(4),
        );
        let _ = write!(self.out, "<{tag}>{m:02}/{d:02}/{y}</{tag}>");
    }
    fn person_ref(&mut self, tag: &str, attr: &str) {
        let p = self.rng.below(self.people);
        let _ = write!(self.out, "<{tag} {attr}=\"person{p}\"/>");
    }

    /// `<text>` with words, keywords and emphasis (mixed content).
    fn text(&mut self) {
        self.out.push_str("<text>");
        for _ in 0..1 + self.rng.below(3) {
            let n = 1 + self.rng.below(3);
            self.words(n);
            self.out.push(' ');
            let tag = if self.rng.chance(60) {
                "keyword"
            } else {
                "emph"
            };
            let n = 1 + self.rng.below(2);
            self.leaf(tag, n);
            self.out.push(' ');
        }
        let n = 1 + self.rng.below(3);
        self.words(n);
        self.out.push_str("</text>");
    }
    fn description(&mut self) {
        self.out.push_str("<description>");
        if self.rng.chance(70) {
            self.text();
        } else {
            self.out.push_str("<parlist>");
            for _ in 0..2 + self.rng.below(3) {
                self.out.push_str("<listitem>");
                self.text();
                self.out.push_str("</listitem>");
            }
            self.out.push_str("</parlist>");
        }
        self.out.push_str("</description>");
    }
    fn annotation(&mut self) {
        self.out.push_str("<annotation>");
        self.person_ref("author", "person");
        self.description();
        let h = 1 + self.rng.below(10);
        let _ = write!(self.out, "<happiness>{h}</happiness></annotation>");
    }

    fn item(&mut self, id: u64) {
        let _ = write!(self.out, "<item id=\"item{id}\">");
        self.leaf("location", 1);
        self.leaf_text("quantity", "1");
        self.leaf("name", 2);
        self.leaf_text("payment", "Creditcard");
        self.description();
        self.leaf_text("shipping", "Will ship internationally");
        for _ in 0..1 + self.rng.below(3) {
            let c = self.rng.below(scaled(CATEGORIES, 1.0));
            let _ = write!(self.out, "<incategory category=\"category{c}\"/>");
        }
        self.out.push_str("<mailbox>");
        for _ in 0..self.rng.below(3) {
            self.out.push_str("<mail>");
            self.leaf("from", 2);
            self.leaf("to", 2);
            self.date("date");
            self.text();
            self.out.push_str("</mail>");
        }
        self.out.push_str("</mailbox></item>");
    }

    fn person(&mut self, id: u64) {
        let _ = write!(self.out, "<person id=\"person{id}\">");
        self.leaf("name", 2);
        self.leaf("emailaddress", 1);
        if self.rng.chance(50) {
            self.leaf_text("phone", "+0 (555) 0100");
        }
        if self.rng.chance(50) {
            self.out.push_str("<address>");
            self.leaf("street", 2);
            self.leaf("city", 1);
            self.leaf("country", 1);
            self.leaf_text("zipcode", "12");
            self.out.push_str("</address>");
        }
        if self.rng.chance(50) {
            let income = 10000 + self.rng.below(90000);
            let _ = write!(self.out, "<profile income=\"{income}\">");
            for _ in 0..self.rng.below(4) {
                let c = self.rng.below(CATEGORIES);
                let _ = write!(self.out, "<interest category=\"category{c}\"/>");
            }
            self.leaf("education", 1);
            self.leaf_text("business", "Yes");
            let age = 18 + self.rng.below(60);
            let _ = write!(self.out, "<age>{age}</age></profile>");
        }
        if self.rng.chance(50) {
            self.out.push_str("<watches>");
            for _ in 0..1 + self.rng.below(4) {
                let a = self.rng.below(self.open);
                let _ = write!(self.out, "<watch open_auction=\"open_auction{a}\"/>");
            }
            self.out.push_str("</watches>");
        }
        self.out.push_str("</person>");
    }

    fn open_auction(&mut self, id: u64) {
        let _ = write!(self.out, "<open_auction id=\"open_auction{id}\">");
        self.leaf_text("initial", "12.50");
        for _ in 0..self.rng.below(6) {
            self.out.push_str("<bidder>");
            self.date("date");
            self.leaf_text("time", "10:25:36");
            self.person_ref("personref", "person");
            self.leaf_text("increase", "3.00");
            self.out.push_str("</bidder>");
        }
        self.leaf_text("current", "40.50");
        let item = self.rng.below(self.items);
        let _ = write!(self.out, "<itemref item=\"item{item}\"/>");
        self.person_ref("seller", "person");
        self.annotation();
        self.leaf_text("quantity", "1");
        self.leaf_text("type", "Regular");
        self.out.push_str("<interval>");
        self.date("start");
        self.date("end");
        self.out.push_str("</interval></open_auction>");
    }

    fn closed_auction(&mut self) {
        self.out.push_str("<closed_auction>");
        self.person_ref("seller", "person");
        self.person_ref("buyer", "person");
        let item = self.rng.below(self.items);
        let _ = write!(self.out, "<itemref item=\"item{item}\"/>");
        self.leaf_text("price", "80.17");
        self.date("date");
        self.leaf_text("quantity", "1");
        self.leaf_text("type", "Regular");
        self.annotation();
        self.out.push_str("</closed_auction>");
    }
}

/// An XMark-like document of scaling `factor` (1.0 is XMark's factor 1), as XML text.
pub fn generate(factor: f64, seed: u64) -> String {
    let mut g = Gen {
        out: String::with_capacity((factor * 6.0e7) as usize),
        rng: Rng(seed.max(1) | 1),
        items: REGIONS.iter().map(|r| scaled(r.1, factor)).sum(),
        people: scaled(PEOPLE, factor),
        open: scaled(OPEN_AUCTIONS, factor),
    };
    g.out
        .push_str("<?xml version=\"1.0\" standalone=\"yes\"?>\n<site><regions>");
    let mut id = 0;
    for (region, n) in REGIONS {
        let _ = write!(g.out, "<{region}>");
        for _ in 0..scaled(n, factor) {
            g.item(id);
            id += 1;
        }
        let _ = write!(g.out, "</{region}>");
    }
    g.out.push_str("</regions><categories>");
    for c in 0..scaled(CATEGORIES, factor) {
        let _ = write!(g.out, "<category id=\"category{c}\">");
        g.leaf("name", 2);
        g.description();
        g.out.push_str("</category>");
    }
    g.out.push_str("</categories><catgraph>");
    for _ in 0..scaled(CATEGORIES, factor) {
        let (a, b) = (g.rng.below(CATEGORIES), g.rng.below(CATEGORIES));
        let _ = write!(g.out, "<edge from=\"category{a}\" to=\"category{b}\"/>");
    }
    g.out.push_str("</catgraph><people>");
    for p in 0..g.people {
        g.person(p);
    }
    g.out.push_str("</people><open_auctions>");
    for a in 0..g.open {
        g.open_auction(a);
    }
    g.out.push_str("</open_auctions><closed_auctions>");
    for _ in 0..scaled(CLOSED_AUCTIONS, factor) {
        g.closed_auction();
    }
    g.out.push_str("</closed_auctions></site>\n");
    g.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::parse;

    #[test]
    fn generated_documents_parse_and_scale_with_the_factor() {
        let small = parse(generate(0.01, 7).as_bytes(), "xmark").unwrap();
        let larger = parse(generate(0.02, 7).as_bytes(), "xmark").unwrap();
        assert_eq!(generate(0.01, 7), generate(0.01, 7));
        let ratio = larger.len() as f64 / small.len() as f64;
        assert!((ratio - 2.0).abs() < 0.2, "{ratio}");
        // Close to the chapter's 17 132 nodes of ~25 bytes at factor 0.01.
        let per_node = small.total_bytes() as f64 / small.len() as f64;
        assert!((10_000..30_000).contains(&small.len()), "{}", small.len());
        assert!((15.0..40.0).contains(&per_node), "{per_node}");
    }
}
