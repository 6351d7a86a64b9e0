//! The capabilities text the tools print after their usage for `-h` (reference §7.4).

use crate::platform::Platform;

/// `words` joined by spaces after `first`, wrapped at column 76 with continuation lines
/// starting with a tab and `indent` spaces.
fn wrapped(first: &str, words: &[String], indent: usize) -> String {
    let mut out = format!("\t{first}");
    let mut col = 8 + first.len();
    for word in words {
        if col + word.len() + 1 > 76 && col > 8 + first.len() {
            out.push('\n');
            out.push('\t');
            out.push_str(&" ".repeat(indent));
            col = 8 + indent;
        }
        out.push_str(word);
        out.push(' ');
        col += word.len() + 1;
    }
    out.push('\n');
    out
}

/// The event lists of each PIC (`generic` or platform), as one `event[0-N]:` line when every
/// PIC has the same list, else one `event<i>:` line per PIC.
fn event_lines(platform: &Platform, generic: bool) -> String {
    let lists: Vec<Vec<String>> = platform
        .pics
        .iter()
        .map(|p| {
            if generic {
                p.generics.iter().map(|(g, _)| g.to_string()).collect()
            } else {
                p.events.clone()
            }
        })
        .collect();
    if lists.is_empty() {
        return String::new();
    }
    if lists.iter().all(|l| *l == lists[0]) {
        return wrapped(&format!("event[0-{}]: ", lists.len() - 1), &lists[0], 17);
    }
    lists.iter().enumerate().map(|(i, l)| wrapped(&format!("event{i}: "), l, 17)).collect()
}

/// The capabilities text of `platform`.
pub fn capabilities(platform: &Platform) -> String {
    let mut out = format!("\tCPU performance counter interface: {}\n\n", platform.cciname);
    out.push_str("\tevent specification syntax:\n");
    out.push_str("\t[picn=]<eventn>[,attr[n][=<val>]][,[picn=]<eventn>[,attr[n][=<val>]],...]\n\n");
    out.push_str("\tGeneric Events:\n\n");
    out.push_str(&event_lines(platform, true));
    out.push_str("\n\tSee generic_events(3CPC) for descriptions of these events\n\n");
    out.push_str("\tPlatform Specific Events:\n\n");
    out.push_str(&event_lines(platform, false));
    let mut attrs: Vec<String> = platform
        .attrs
        .iter()
        .filter(|a| **a != crate::consts::PICNUM)
        .map(|a| a.to_string())
        .collect();
    attrs.retain(|a| a != "nouser" && a != "sys");
    attrs.extend(["nouser".to_string(), "sys".to_string()]);
    out.push('\n');
    out.push_str(&wrapped("attributes: ", &attrs, 20));
    out.push_str(&format!("\n\t{}\n", platform.cpuref));
    out
}
