//! The node tree of a tree-structured document and each node's on-disk size.
//!
//! The chapter's data model (docs/references.md, the dissertation's §2.2.2): a labelled
//! tree whose inner nodes are elements (a tag and attributes) and whose leaves are
//! elements or text values. Every node is stored with two 4-byte pointers, to its first
//! child and to its right sibling, so that a sibling is reached without reading the
//! subtree in between (the default layout gets the same pointers, for a fair
//! comparison). Node ids are document (depth-first) order.

use std::borrow::Cow;
use std::collections::HashMap;

use encoding_rs::{Encoding, UTF_8};

use quick_xml::escape::EscapeError;
use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::error::TreeError;

/// "No node": the end of a child or sibling chain, the root's parent.
pub const NONE: u32 = u32::MAX;

/// Bytes every stored node carries: its first-child and right-sibling pointers.
pub const POINTER_BYTES: u32 = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    Element,
    Text,
}

#[derive(Clone, Debug)]
pub struct Node {
    pub kind: NodeKind,
    /// Interned tag name of an element ([`Document::name`]); `NONE` for text.
    pub name: u32,
    /// `attrs[first_attr..first_attr + attr_count]` of the document.
    pub first_attr: u32,
    pub attr_count: u32,
    pub parent: u32,
    pub first_child: u32,
    pub next_sibling: u32,
    /// On-disk size: pointers, tag, attribute names and values, or the text.
    pub size_bytes: u32,
    /// The root is at depth 1, as in the chapter.
    pub depth: u32,
}

/// One attribute: interned name and unescaped value.
#[derive(Clone, Debug)]
pub struct Attr {
    pub name: u32,
    pub value: String,
}

#[derive(Clone, Debug, Default)]
pub struct Document {
    pub nodes: Vec<Node>,
    pub attrs: Vec<Attr>,
    names: Vec<String>,
    name_ids: HashMap<String, u32>,
}

impl Document {
    pub fn root(&self) -> u32 {
        0
    }
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
    pub fn node(&self, id: u32) -> &Node {
        &self.nodes[id as usize]
    }
    pub fn name(&self, id: u32) -> &str {
        &self.names[id as usize]
    }
    /// The interned id of a tag or attribute name, if the document uses it.
    pub fn name_id(&self, name: &str) -> Option<u32> {
        self.name_ids.get(name).copied()
    }
    /// The children of `id`, first to last, following the sibling pointers.
    pub fn children(&self, id: u32) -> impl Iterator<Item = u32> + '_ {
        let first = self.nodes[id as usize].first_child;
        std::iter::successors((first != NONE).then_some(first), move |&c| {
            let n = self.nodes[c as usize].next_sibling;
            (n != NONE).then_some(n)
        })
    }
    /// The value of attribute `name` of node `id`.
    pub fn attr(&self, id: u32, name: u32) -> Option<&str> {
        let n = &self.nodes[id as usize];
        let range = n.first_attr as usize..(n.first_attr + n.attr_count) as usize;
        self.attrs[range]
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.value.as_str())
    }
    /// Total stored bytes of all nodes.
    pub fn total_bytes(&self) -> u64 {
        self.nodes.iter().map(|n| n.size_bytes as u64).sum()
    }
    /// Height of the tree (the root alone is 1).
    pub fn height(&self) -> u32 {
        self.nodes.iter().map(|n| n.depth).max().unwrap_or(0)
    }
    /// Mean number of children of the nodes that have any.
    pub fn mean_fanout(&self) -> f64 {
        let inner = self.nodes.iter().filter(|n| n.first_child != NONE).count();
        if inner == 0 {
            return 0.0;
        }
        (self.nodes.len() - 1) as f64 / inner as f64
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.name_ids.insert(name.to_string(), id);
        id
    }
}

/// Builds a [`Document`] from a stream of open / close / text events.
#[derive(Default)]
pub struct Builder {
    doc: Document,
    /// Open elements, innermost last.
    stack: Vec<u32>,
    /// Last child of each open element (to link the next sibling).
    last_child: Vec<u32>,
    closed_root: bool,
}

impl Builder {
    fn push(&mut self, mut node: Node) -> u32 {
        let id = self.doc.nodes.len() as u32;
        node.parent = self.stack.last().copied().unwrap_or(NONE);
        node.depth = self.stack.len() as u32 + 1;
        if let Some(&prev) = self.last_child.last() {
            if prev == NONE {
                self.doc.nodes[node.parent as usize].first_child = id;
            } else {
                self.doc.nodes[prev as usize].next_sibling = id;
            }
            *self.last_child.last_mut().expect("open element") = id;
        }
        self.doc.nodes.push(node);
        id
    }

    /// Opens an element with `attrs` (name, unescaped value, bytes stored).
    pub fn open(&mut self, tag: &str, attrs: &[(&str, String, usize)]) {
        let name = self.doc.intern(tag);
        let first_attr = self.doc.attrs.len() as u32;
        let mut size = POINTER_BYTES as usize + tag.len();
        for (n, v, stored) in attrs {
            let name = self.doc.intern(n);
            self.doc.attrs.push(Attr {
                name,
                value: v.clone(),
            });
            size += n.len() + stored;
        }
        let id = self.push(Node {
            kind: NodeKind::Element,
            name,
            first_attr,
            attr_count: attrs.len() as u32,
            parent: NONE,
            first_child: NONE,
            next_sibling: NONE,
            size_bytes: size.min(u32::MAX as usize) as u32,
            depth: 0,
        });
        self.stack.push(id);
        self.last_child.push(NONE);
    }

    pub fn close(&mut self) {
        self.stack.pop();
        self.last_child.pop();
        if self.stack.is_empty() {
            self.closed_root = true;
        }
    }

    /// A text leaf of `bytes` stored bytes (whitespace-only text is not stored).
    pub fn text(&mut self, bytes: usize) {
        if self.stack.is_empty() || bytes == 0 {
            return;
        }
        self.push(Node {
            kind: NodeKind::Text,
            name: NONE,
            first_attr: 0,
            attr_count: 0,
            parent: NONE,
            first_child: NONE,
            next_sibling: NONE,
            size_bytes: (POINTER_BYTES as usize + bytes).min(u32::MAX as usize) as u32,
            depth: 0,
        });
    }

    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    pub fn finish(self) -> Document {
        self.doc
    }
}

/// 1-based line and column of byte `pos` of `bytes`.
fn line_column(bytes: &[u8], pos: usize) -> (usize, usize) {
    let before = &bytes[..pos.min(bytes.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = before.len()
        - before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1)
        + 1;
    (line, column)
}

fn xml_error(bytes: &[u8], path: &str, pos: usize, message: String) -> TreeError {
    let (line, column) = line_column(bytes, pos);
    TreeError::Xml {
        path: path.to_string(),
        line,
        column,
        message,
    }
}

/// The attributes of a start tag as (name, unescaped value, stored bytes).
fn attributes(e: &BytesStart<'_>) -> Result<Vec<(String, String, usize)>, String> {
    let mut out = Vec::new();
    for a in e.attributes() {
        let a = a.map_err(|err| err.to_string())?;
        let name = a.key.as_ref().to_string();
        let raw = a.value.to_string();
        let value = match quick_xml::escape::unescape(&raw) {
            Ok(v) => v.into_owned(),
            // An entity the document's DTD declares (DTDs are not read): kept as written.
            Err(EscapeError::UnrecognizedEntity(..)) => raw.clone(),
            Err(err) => return Err(format!("attribute `{name}`: {err}")),
        };
        out.push((name, value, raw.len()));
    }
    Ok(out)
}

/// The label of `encoding="..."` in the XML declaration at the start of `bytes`.
fn declared_label(bytes: &[u8]) -> Option<&[u8]> {
    let head = &bytes[..bytes.len().min(512)];
    let decl = &head[..head.windows(2).position(|w| w == b"?>")?];
    if !decl.starts_with(b"<?xml") {
        return None;
    }
    let at = decl.windows(8).position(|w| w == b"encoding")? + 8;
    let rest = decl[at..]
        .trim_ascii_start()
        .strip_prefix(b"=")?
        .trim_ascii_start();
    let quote = *rest.first().filter(|q| **q == b'"' || **q == b'\'')?;
    let label = &rest[1..];
    Some(&label[..label.iter().position(|&b| b == quote)?])
}

/// `bytes` as UTF-8: documents in another encoding (a byte order mark, or the
/// declaration's `encoding`, such as windows-1250 or Shift_JIS) are decoded first, so
/// that on-disk sizes count UTF-8 bytes whatever the file's encoding.
fn to_utf8<'a>(bytes: &'a [u8], path: &str) -> Result<Cow<'a, [u8]>, TreeError> {
    let (encoding, body) = match Encoding::for_bom(bytes) {
        Some((e, bom)) => (e, &bytes[bom..]),
        None => match declared_label(bytes) {
            None => (UTF_8, bytes),
            Some(label) => match Encoding::for_label(label) {
                Some(e) => (e, bytes),
                None => {
                    let label = String::from_utf8_lossy(label);
                    let message = format!("the declared encoding `{label}` is not one we know");
                    return Err(xml_error(bytes, path, 0, message));
                }
            },
        },
    };
    if encoding == UTF_8 {
        return Ok(Cow::Borrowed(body));
    }
    match encoding.decode_without_bom_handling_and_without_replacement(body) {
        Some(text) => Ok(Cow::Owned(text.into_owned().into_bytes())),
        None => {
            let message = format!("not valid {} text, as its encoding says", encoding.name());
            Err(xml_error(bytes, path, 0, message))
        }
    }
}

/// Parses an XML document held in memory; `path` names it in errors.
pub fn parse(bytes: &[u8], path: &str) -> Result<Document, TreeError> {
    let utf8 = to_utf8(bytes, path)?;
    parse_utf8(&utf8, path)
}

fn parse_utf8(bytes: &[u8], path: &str) -> Result<Document, TreeError> {
    let mut reader = Reader::from_reader(bytes);
    let mut buf = Vec::new();
    let mut b = Builder::default();
    // Where each open element started, for "never closed" errors.
    let mut opened_at: Vec<usize> = Vec::new();
    loop {
        let start = reader.buffer_position() as usize;
        let event = reader
            .read_event_into(&mut buf)
            .map_err(|e| xml_error(bytes, path, reader.error_position() as usize, e.to_string()))?;
        let fail = |message: String| xml_error(bytes, path, start, message);
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                if b.closed_root {
                    return Err(fail("a second root element (a document has one)".into()));
                }
                let tag = e.name().as_ref().to_string();
                let attrs = attributes(e).map_err(fail)?;
                let refs: Vec<(&str, String, usize)> = attrs
                    .iter()
                    .map(|(n, v, s)| (n.as_str(), v.clone(), *s))
                    .collect();
                b.open(&tag, &refs);
                if matches!(event, Event::Empty(_)) {
                    b.close();
                } else {
                    opened_at.push(start);
                }
            }
            Event::End(_) => {
                opened_at.pop();
                b.close();
            }
            Event::Text(ref t) => {
                let trimmed = t.as_ref().trim_ascii();
                if !trimmed.is_empty() && b.depth() == 0 {
                    return Err(fail("text outside the root element".into()));
                }
                b.text(trimmed.len());
            }
            Event::CData(ref t) => b.text(t.len()),
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if let Some(&at) = opened_at.last() {
        return Err(xml_error(
            bytes,
            path,
            at,
            "this element is never closed (the document ends first)".into(),
        ));
    }
    let doc = b.finish();
    if doc.is_empty() {
        return Err(TreeError::EmptyDocument {
            path: path.to_string(),
        });
    }
    Ok(doc)
}

/// Reads and parses an XML file.
pub fn load(path: &std::path::Path) -> Result<Document, TreeError> {
    let bytes = std::fs::read(path).map_err(|source| TreeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&bytes, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_elements_text_and_attributes_with_sizes() {
        let d = parse(b"<a x='1&amp;2'><b>hi</b><c/></a>", "t").unwrap();
        assert_eq!(d.len(), 4);
        let a = d.node(0);
        // pointers 8 + "a" 1 + "x" 1 + raw value "1&amp;2" 7
        assert_eq!(a.size_bytes, 17);
        assert_eq!(d.attr(0, d.name_id("x").unwrap()), Some("1&2"));
        let kids: Vec<u32> = d.children(0).collect();
        assert_eq!(kids, vec![1, 3]);
        assert_eq!(d.node(2).kind, NodeKind::Text);
        assert_eq!(d.node(2).size_bytes, 10);
        assert_eq!(d.node(2).depth, 3);
        assert_eq!(d.height(), 3);
    }

    #[test]
    fn declared_encodings_are_decoded_to_utf8() {
        // "Tűz" in windows-1250 (ű is 0xFB), in an attribute and in text.
        let mut xml = b"<?xml version='1.0' encoding=\"windows-1250\"?>\n<a t='T".to_vec();
        xml.extend_from_slice(b"\xFBz'>T\xFBz</a>");
        let d = parse(&xml, "t").unwrap();
        assert_eq!(d.attr(0, d.name_id("t").unwrap()), Some("T\u{171}z"));
        // pointers 8 + the UTF-8 text's 4 bytes
        assert_eq!(d.node(1).size_bytes, 12);
        let e = parse(b"<?xml version='1.0' encoding='klingon'?><a/>", "k.xml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("k.xml:1:1") && e.contains("klingon"), "{e}");
        // UTF-16 with its byte order mark.
        let utf16: Vec<u8> = "\u{feff}<?xml version=\"1.0\" encoding=\"UTF-16\"?><a>x</a>"
            .encode_utf16()
            .flat_map(|u| u.to_le_bytes())
            .collect();
        assert_eq!(parse(&utf16, "u").unwrap().len(), 2);
    }

    #[test]
    fn malformed_xml_names_line_and_column() {
        let e = parse(b"<a>\n  <b></c>\n</a>", "doc.xml").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("doc.xml:2:"), "{msg}");
        let e = parse(b"<a>\n<b>\n", "doc.xml").unwrap_err().to_string();
        assert!(
            e.contains("doc.xml:2:1") && e.contains("never closed"),
            "{e}"
        );
        let e = parse(b"<a/><b/>", "d").unwrap_err().to_string();
        assert!(e.contains("second root"), "{e}");
        // A bare `&` is malformed; an entity the DTD would declare is kept as written.
        let e = parse(b"<a>\n<b n='A & B'/></a>", "d")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("d:2:"), "{e}");
        let d = parse(b"<a d='&doc.date;'/>", "d").unwrap();
        assert_eq!(d.attr(0, d.name_id("d").unwrap()), Some("&doc.date;"));
    }
}
