//! The XPath subset queries are written in, and its evaluation on the node tree by the
//! standard strategy (the dissertation's Algorithm 1): apply the first location step to
//! the context node, then the rest of the query to each node it selected, depth first.
//! Evaluation records every node it touches, in order: the node access sequence the
//! layouts are measured with. The nodes a step selects (Algorithm 1's set S) are held in
//! memory while the rest of the query runs from each of them.
//!
//! Supported: absolute paths of child (`/`) and descendant (`//`) steps, name tests and
//! the wildcard `*`, and attribute predicates `[@name]`, `[@name='value']` (or
//! `"value"`), several per step. A child step reads every child of the context node
//! through the first-child and right-sibling pointers; a descendant step reads the
//! context's whole subtree in document order.

use crate::doc::{Document, NodeKind, NONE};
use crate::error::TreeError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    Child,
    Descendant,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NameTest {
    Any,
    Name(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttrPredicate {
    pub name: String,
    /// `None`: the attribute only has to exist.
    pub value: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub axis: Axis,
    pub test: NameTest,
    pub predicates: Vec<AttrPredicate>,
}

/// A parsed query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    pub text: String,
    pub steps: Vec<Step>,
}

struct Parser<'a> {
    text: &'a str,
    chars: Vec<char>,
    at: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl Into<String>) -> TreeError {
        TreeError::Query {
            query: self.text.to_string(),
            position: self.at + 1,
            message: message.into(),
        }
    }
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }
    fn eat(&mut self, c: char) -> bool {
        let hit = self.peek() == Some(c);
        self.at += hit as usize;
        hit
    }
    fn skip_space(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.at += 1;
        }
    }
    fn name(&mut self) -> Result<String, TreeError> {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|c| c.is_alphanumeric() || "_-.:".contains(c))
        {
            self.at += 1;
        }
        if self.at == start {
            return Err(self.error("expected a name"));
        }
        Ok(self.chars[start..self.at].iter().collect())
    }
    fn literal(&mut self) -> Result<String, TreeError> {
        let quote = self.peek().filter(|c| *c == '\'' || *c == '"');
        let Some(q) = quote else {
            return Err(self.error("expected a quoted value"));
        };
        self.at += 1;
        let start = self.at;
        while self.peek().is_some_and(|c| c != q) {
            self.at += 1;
        }
        if !self.eat(q) {
            return Err(self.error("unterminated string"));
        }
        Ok(self.chars[start..self.at - 1].iter().collect())
    }
    fn predicate(&mut self) -> Result<AttrPredicate, TreeError> {
        self.skip_space();
        if !self.eat('@') {
            return Err(
                self.error("only attribute predicates are supported: [@name] or [@name='value']")
            );
        }
        let name = self.name()?;
        self.skip_space();
        let value = if self.eat('=') {
            self.skip_space();
            Some(self.literal()?)
        } else {
            None
        };
        self.skip_space();
        if !self.eat(']') {
            return Err(self.error("expected `]`"));
        }
        Ok(AttrPredicate { name, value })
    }
    fn step(&mut self, axis: Axis) -> Result<Step, TreeError> {
        let test = if self.eat('*') {
            NameTest::Any
        } else {
            NameTest::Name(self.name()?)
        };
        let mut predicates = Vec::new();
        while self.eat('[') {
            predicates.push(self.predicate()?);
        }
        Ok(Step {
            axis,
            test,
            predicates,
        })
    }
}

impl Query {
    pub fn parse(text: &str) -> Result<Query, TreeError> {
        let mut p = Parser {
            text,
            chars: text.trim().chars().collect(),
            at: 0,
        };
        let mut steps = Vec::new();
        while p.peek().is_some() {
            if !p.eat('/') {
                return Err(p.error("expected `/` or `//` (queries are absolute paths)"));
            }
            let axis = if p.eat('/') {
                Axis::Descendant
            } else {
                Axis::Child
            };
            steps.push(p.step(axis)?);
        }
        if steps.is_empty() {
            return Err(p.error("empty query"));
        }
        Ok(Query {
            text: text.trim().to_string(),
            steps,
        })
    }

    /// Evaluates the query on `doc`; returns the nodes touched, in order, and the result.
    pub fn run(&self, doc: &Document) -> (Vec<u32>, Vec<u32>) {
        let mut e = Evaluation {
            doc,
            touched: Vec::new(),
            result: Vec::new(),
        };
        e.location_step(NONE, &self.steps);
        (e.touched, e.result)
    }
}

struct Evaluation<'a> {
    doc: &'a Document,
    touched: Vec<u32>,
    result: Vec<u32>,
}

impl Evaluation<'_> {
    fn matches(&self, v: u32, step: &Step) -> bool {
        let n = self.doc.node(v);
        if n.kind != NodeKind::Element {
            return false;
        }
        let name_ok = match &step.test {
            NameTest::Any => true,
            NameTest::Name(s) => self.doc.name(n.name) == s,
        };
        name_ok
            && step.predicates.iter().all(|p| {
                let value = self
                    .doc
                    .name_id(&p.name)
                    .and_then(|id| self.doc.attr(v, id));
                match (&p.value, value) {
                    (_, None) => false,
                    (None, Some(_)) => true,
                    (Some(want), Some(got)) => want == got,
                }
            })
    }

    /// The children of `context` (the document node for `NONE`), each touched.
    fn walk_children(&mut self, context: u32, step: &Step, out: &mut Vec<u32>) {
        let first = if context == NONE {
            self.doc.root()
        } else {
            self.doc.node(context).first_child
        };
        let mut c = first;
        while c != NONE {
            self.touched.push(c);
            if self.matches(c, step) {
                out.push(c);
            }
            if step.axis == Axis::Descendant {
                self.walk_children(c, step, out);
            }
            c = if context == NONE {
                NONE
            } else {
                self.doc.node(c).next_sibling
            };
        }
    }

    /// Algorithm 1: S := the first step applied to `context`; the rest to each of S.
    fn location_step(&mut self, context: u32, steps: &[Step]) {
        let mut selected = Vec::new();
        self.walk_children(context, &steps[0], &mut selected);
        if steps.len() == 1 {
            self.result.extend(selected);
            return;
        }
        // S is a set of node records in memory: going on from one of them needs its
        // first-child pointer, which S holds, so it is not read again.
        for m in selected {
            self.location_step(m, &steps[1..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::parse;

    fn letters(doc: &Document, ids: &[u32]) -> String {
        ids.iter()
            .map(|&v| doc.name(doc.node(v).name).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn child_steps_walk_siblings_then_descend_into_each_match() {
        let d = parse(b"<r><a id='1'><n/><x/></a><b/><a id='2'><n/></a></r>", "t").unwrap();
        let q = Query::parse("/r/a/n").unwrap();
        let (touched, result) = q.run(&d);
        assert_eq!(letters(&d, &touched), "r a b a n x n");
        assert_eq!(result.len(), 2);
        let q = Query::parse("/r/a[@id='2']/n").unwrap();
        assert_eq!(q.run(&d).1.len(), 1);
        let q = Query::parse("/r/*[@id]").unwrap();
        assert_eq!(q.run(&d).1.len(), 2);
    }

    #[test]
    fn descendant_steps_read_the_whole_subtree() {
        let d = parse(b"<r><a><n/></a><b><n/></b></r>", "t").unwrap();
        let (touched, result) = Query::parse("//n").unwrap().run(&d);
        assert_eq!(letters(&d, &touched), "r a n b n");
        assert_eq!(result.len(), 2);
    }

    #[test]
    fn unsupported_syntax_is_an_error_with_its_position() {
        let e = Query::parse("/r/a[1]").unwrap_err().to_string();
        assert!(
            e.contains("character 6") && e.contains("attribute predicates"),
            "{e}"
        );
        assert!(Query::parse("r/a").is_err());
        assert!(Query::parse("/r/a[@id='x").is_err());
    }
}
