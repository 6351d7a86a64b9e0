//! The event specification of the tools' `-c` option (reference §7.2):
//! `[picN=]EVENT[,attr[N][=VAL]][,nouser[N]][,sys[N]]…`, e.g.
//! `pic0=PAPI_tot_cyc,pic1=PAPI_tot_ins,sys`.

use crate::consts::{CPC_COUNT_SYSTEM, CPC_COUNT_USER, PICNUM};
use crate::platform::{Platform, parse_raw_code};
use crate::set::{Attr, Set};

/// One request of a spec: its counter, event, flags and attributes (without `picnum`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecRequest {
    /// The counter.
    pub pic: usize,
    /// The event.
    pub event: String,
    /// `CPC_COUNT_USER` / `CPC_COUNT_SYSTEM`.
    pub flags: u32,
    /// The attributes, `picnum` excluded.
    pub attrs: Vec<Attr>,
}

/// A parsed `-c` spec: its text and its requests in counter order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// The spec as given.
    pub text: String,
    /// The requests, lowest counter first.
    pub requests: Vec<SpecRequest>,
}

/// Per-counter settings while parsing.
#[derive(Debug, Clone, Default)]
struct PicSettings {
    event: Option<String>,
    nouser: bool,
    sys: bool,
    attrs: Vec<Attr>,
}

/// Whether `pic` can take `event` from a spec: a name it counts, or a nonzero raw code (the
/// tools refuse code 0) on a counter that takes raw codes.
fn pic_takes(platform: &Platform, pic: usize, event: &str) -> bool {
    platform.pics.get(pic).is_some_and(|p| p.counts(event))
        || (parse_raw_code(event).is_some_and(|c| c != 0) && platform.pic_accepts(pic, event))
}

/// Splits `name` into a word and a trailing decimal counter number (`sys1` → (`sys`, 1)).
fn split_number(name: &str) -> (&str, Option<usize>) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits == name.len() {
        return (name, None);
    }
    let (word, number) = name.split_at(name.len() - digits);
    (word, number.parse().ok())
}

/// Parses `text` for `platform`; the error is the tools' message (`bad token 'x'`, …).
pub fn parse(platform: &Platform, text: &str) -> Result<Spec, String> {
    let npic = platform.pics.len();
    let mut pics = vec![PicSettings::default(); npic];
    let mut all = PicSettings::default();
    let tool_attrs: Vec<&str> = platform
        .attrs
        .iter()
        .copied()
        .filter(|a| *a != PICNUM && *a != "nouser" && *a != "sys")
        .collect();
    for token in text.split(',').filter(|t| !t.is_empty()) {
        let (key, value) = match token.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (token, None),
        };
        let (word, number) = split_number(key);
        if word == "pic" && number.is_some_and(|n| n < npic) {
            let n = number.unwrap_or_default();
            if pics[n].event.is_some() {
                return Err(format!("repeated '{key}' token"));
            }
            let event = value.filter(|v| !v.is_empty()).ok_or(format!("missing '{key}' value"))?;
            if !pic_takes(platform, n, event) {
                return Err(format!("{key} cannot measure event '{event}' on this cpu"));
            }
            pics[n].event = Some(event.to_string());
            continue;
        }
        let target = match number {
            Some(n) if n < npic => Some(n),
            Some(_) => return Err(format!("bad token '{token}'")),
            None => None,
        };
        let settings = match target {
            Some(n) => &mut pics[n],
            None => &mut all,
        };
        match word {
            "nouser" => settings.nouser = true,
            "sys" => settings.sys = true,
            _ if tool_attrs.contains(&word) => {
                let value = match value {
                    None => 1,
                    Some(v) => parse_raw_code(v)
                        .filter(|_| v.trim_start().chars().any(|c| c.is_ascii_digit()))
                        .ok_or(format!("invalid value '{v}' for attribute '{word}'"))?
                        as u64,
                };
                settings.attrs.push(Attr::new(word, value));
            }
            _ if value.is_none() && number.is_none() => {
                // A bare event: the first counter after the highest one used that counts it.
                let after = pics.iter().rposition(|p| p.event.is_some()).map_or(0, |p| p + 1);
                let pic = (after..npic).find(|&p| pic_takes(platform, p, token));
                let pic = pic.ok_or_else(|| {
                    // illumos says only "bad token"; an event that some counter could count
                    // says why (more events than counters, or the order of the spec).
                    let known = (0..npic).any(|p| pic_takes(platform, p, token));
                    if known && after > 0 {
                        format!(
                            "bad token '{token}': no counter after pic{} is left for it ({npic} \
                             counters)",
                            after - 1
                        )
                    } else {
                        format!("bad token '{token}'")
                    }
                })?;
                pics[pic].event = Some(token.to_string());
            }
            _ => return Err(format!("bad token '{token}'")),
        }
    }
    let requests: Vec<SpecRequest> = pics
        .iter()
        .enumerate()
        .filter_map(|(pic, p)| {
            let event = p.event.clone()?;
            let mut flags = CPC_COUNT_USER;
            if all.nouser || p.nouser {
                flags &= !CPC_COUNT_USER;
            }
            if all.sys || p.sys {
                flags |= CPC_COUNT_SYSTEM;
            }
            let mut attrs = all.attrs.clone();
            for attr in &p.attrs {
                attrs.retain(|a| a.name != attr.name);
                attrs.push(attr.clone());
            }
            Some(SpecRequest { pic, event, flags, attrs })
        })
        .collect();
    if requests.is_empty() {
        return Err(format!("no events in '{text}'"));
    }
    Ok(Spec { text: text.to_string(), requests })
}

impl Spec {
    /// A set of the spec's requests, each with `picnum` = its counter, added in counter order.
    pub fn to_set(&self, platform: &Platform) -> crate::Result<Set> {
        let mut set = Set::new();
        for r in &self.requests {
            let mut attrs = r.attrs.clone();
            attrs.push(Attr::new(PICNUM, r.pic as u64));
            set.add_request(platform, &r.event, 0, r.flags, &attrs)?;
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::split_number;

    #[test]
    fn a_trailing_number_names_a_counter() {
        assert_eq!(split_number("sys1"), ("sys", Some(1)));
        assert_eq!(split_number("pic12"), ("pic", Some(12)));
        assert_eq!(split_number("nouser"), ("nouser", None));
        assert_eq!(split_number("123"), ("123", None));
    }
}
