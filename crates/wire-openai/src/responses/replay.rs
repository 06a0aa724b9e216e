//! Telling the deltas a gateway replays from new ones: [`DeltaLog`], the one rule a call's
//! arguments and each message part's text share, and the decoder's steps that apply it; and
//! completing a message's parts with the final text the server closes them with.

use std::collections::BTreeMap;
use std::ops::Bound;

use serde_json::Value;

use super::item::{Item, PartKind, kind_and_text, part_text};
use super::{Event, StreamDecoder};
use crate::DecodeError;
use crate::assembly::Deltas;

/// What the decoder knows of one message item's text.
#[derive(Debug, Default)]
pub(super) struct MessageParts {
    /// The item was announced (`response.output_item.added`).
    announced: bool,
    /// How many times the item was announced again after some of its text arrived. A part
    /// whose own count is below it starts its replay when it is next reached (see
    /// [`MessageParts::part`]), so an announcement costs the same however many parts it has.
    replays: u64,
    /// The text the latest of those announcements carried for each part, by `content_index`
    /// (normally none).
    replayed_text: Vec<String>,
    /// Its parts that streamed text, by `content_index`.
    parts: BTreeMap<u64, TextPart>,
}

impl MessageParts {
    /// The part at `index`, recorded if new, with the replay the item's latest announcement
    /// started for it, if it has not started yet.
    fn part(&mut self, index: u64) -> &mut TextPart {
        let replays = self.replays;
        let part = self.parts.entry(index).or_insert_with(|| TextPart {
            replays,
            ..TextPart::default()
        });
        if part.replays < replays {
            part.replays = replays;
            let announced = usize::try_from(index)
                .ok()
                .and_then(|at| self.replayed_text.get(at))
                .map_or("", String::as_str);
            part.deltas.start_replay(&part.text, announced);
        }
        part
    }
}

impl MessageParts {
    /// Whether final texts (by `content_index`) continue this message's text: some part they
    /// give has text here, and each such part's final text begins with it.
    fn continued_by(&self, texts: &[(u64, PartKind, &str)]) -> bool {
        let mut overlap = false;
        for (index, _, text) in texts {
            let Some(part) = self.parts.get(index).filter(|part| !part.text.is_empty()) else {
                continue;
            };
            if !text.starts_with(part.text.as_str()) {
                return false;
            }
            overlap = true;
        }
        overlap
    }

    /// How many bytes at the start of `rest` the parts after part `index` spell, one after
    /// another in `content_index` order, with the text of `kind` they streamed: `rest` is a
    /// final text for part `index` past that part's own text. Servers that give every delta a
    /// part of its own (vLLM's Responses streaming counted one per delta,
    /// vllm-project/vllm#29947; tiles' MLX backend) close the message with its whole text in
    /// one part, so that text repeats the later parts before anything new. The count stops at
    /// the first part whose text `rest` does not go on with, or that holds text of another kind.
    fn streamed_after(&self, index: u64, kind: PartKind, rest: &str) -> usize {
        let mut at = 0;
        let later = self.parts.range((Bound::Excluded(index), Bound::Unbounded));
        for (_, part) in later {
            if part.text.is_empty() {
                continue;
            }
            if !part.holds(kind) || !rest[at..].starts_with(part.text.as_str()) {
                break;
            }
            at += part.text.len();
        }
        at
    }

    /// Whether some part of this message has text of `kind`.
    fn has_text_of(&self, kind: PartKind) -> bool {
        self.parts
            .values()
            .any(|part| !part.text.is_empty() && part.holds(kind))
    }
}

/// The text one message part has streamed (`output_text` or `refusal` deltas), kept apart from
/// the answer's text so that its replayed deltas can be told as a call's are.
#[derive(Debug, Default)]
struct TextPart {
    text: String,
    deltas: DeltaLog,
    /// The item's [`MessageParts::replays`] when this part last took its replay.
    replays: u64,
    /// The kinds of text that reached it: text (bit 0), refusal (bit 1). A server that numbers
    /// every delta's part 0 streams both kinds into one part.
    kinds: u8,
}

impl TextPart {
    /// Records that text of `kind` reached the part.
    fn reached_by(&mut self, kind: PartKind) {
        self.kinds |= kind_bit(kind);
    }

    /// Whether text of `kind` reached the part.
    fn holds(&self, kind: PartKind) -> bool {
        self.kinds & kind_bit(kind) != 0
    }
}

/// The bit of [`TextPart::kinds`] for `kind`.
fn kind_bit(kind: PartKind) -> u8 {
    match kind {
        PartKind::Text => 1,
        PartKind::Refusal => 2,
    }
}

/// What a stream's `sequence_number`s can tell of its deltas so far (see [`DeltaLog::fresh`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Numbering {
    /// No event was numbered above an earlier one yet: numbers that never rise (a gateway whose
    /// events default to `sequence_number: 0`, BerriAI/litellm PR #28899) cannot tell a
    /// replayed delta from a new one with the same text.
    #[default]
    Unproven,
    /// The numbers rose, and nothing showed them out of order: a delta's number tells a replay.
    Rising,
    /// They showed they are not in order: from now on only the text tells a replay.
    Broken,
}

impl Numbering {
    /// Follows an event numbered `number` (if at all) after the highest number so far, `last`;
    /// returns whether it is in order: above `last`, or either is unknown. The first event
    /// numbered above an earlier one shows the numbers rise.
    pub(super) fn follow(&mut self, number: Option<u64>, last: Option<u64>) -> bool {
        let (Some(number), Some(last)) = (number, last) else {
            return true;
        };
        let in_order = number > last;
        if in_order && *self == Numbering::Unproven {
            *self = Numbering::Rising;
        }
        in_order
    }

    /// Takes an event that shows the numbers out of order unless it is `in_order` (a new call
    /// or message announced).
    pub(super) fn broken_unless(&mut self, in_order: bool) {
        if !in_order {
            *self = Numbering::Broken;
        }
    }
}

/// A delta's `sequence_number`, and whether it is above every earlier event's
/// ([`Numbering::follow`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Sequence {
    pub(super) number: u64,
    pub(super) in_order: bool,
}

/// What the decoder knows of the deltas that spell one text (a call's arguments, or one part of
/// a message), to tell the deltas a gateway replays from new ones. Calls and message parts share
/// this one rule; see [`DeltaLog::fresh`].
#[derive(Debug, Default, Clone)]
pub(super) struct DeltaLog {
    /// The deltas appended to the text that carried a `sequence_number`, in increasing order of
    /// it: the number and the byte range of the text the delta fills.
    numbered: Vec<(u64, std::ops::Range<usize>)>,
    /// While the text is replayed (its item announced again after some of it arrived): how many
    /// bytes of it the replayed deltas have repeated so far.
    replayed: Option<usize>,
    /// While a final text (a message part's `.done` event or finished item) runs ahead of the
    /// deltas: how many bytes of the text the deltas have brought so far. The deltas still to
    /// come repeat the rest (see [`DeltaLog::fresh`]).
    ahead: Option<usize>,
}

impl DeltaLog {
    /// Starts a replay of `text`, whose item was announced again carrying `announced` as its
    /// text (normally none): the replay has repeated it when it begins `text`. A text with
    /// nothing beyond it has nothing to replay.
    pub(super) fn start_replay(&mut self, text: &str, announced: &str) {
        let repeated = if text.starts_with(announced) {
            announced.len()
        } else {
            0
        };
        self.replayed = (repeated < text.len()).then_some(repeated);
    }

    /// The part of a delta for `text` that is new, or `None` when it repeats one the text has: a
    /// gateway that re-sends a stream's events (all of them again, or from some point on, as a
    /// stream resumed after a number is) re-sends deltas. `numbering` is what the stream's
    /// numbers can tell so far; this marks them [`Numbering::Broken`] when a delta shows they
    /// are out of order.
    ///
    /// By number, once the stream's numbers have risen and while nothing showed them out of
    /// order ([`Numbering::Rising`]): a delta under a number not above every earlier event's
    /// that one of the text's deltas already had, with the same text, is that delta again. A
    /// delta above every earlier number is new, once the text's deltas had numbers. A delta
    /// under a number not above every earlier one that the text's deltas did not have with
    /// that text (in a stream that only resends what it sent, every such delta is one) shows
    /// that the numbers cannot tell a replay (so does a new call or message announced under
    /// such a number), and from then on only the text does. Numbers that never rose tell
    /// nothing: under them a delta repeating the one before it, number and text, is new.
    ///
    /// By text, while the text is replayed (its item announced again after some of it arrived)
    /// and its deltas cannot be told by number: a delta that repeats the text where the replay
    /// has got to adds nothing, and one that runs past its end adds only the part past it, which
    /// ends the replay. A delta that does not repeat it ends the replay and is new as a whole:
    /// the gateway re-sent the item but not its deltas.
    ///
    /// Ahead, first, while a final text has run ahead of the deltas ([`DeltaLog::ran_ahead`]),
    /// whatever their numbers (deltas the server sent before its final text can arrive after
    /// it, under numbers never seen): a delta that repeats the text where the deltas have got
    /// to adds nothing, and one that runs past its end adds only the part past it. One that
    /// does not repeat it is told by the rules below.
    ///
    /// A text therefore never holds a replayed delta twice, and its display deltas always spell
    /// exactly the text: nothing shown is taken back, nothing is shown twice (until, for a call,
    /// a `.done` event replaces the arguments with the final text).
    fn fresh<'f>(
        &mut self,
        text: &str,
        fragment: &'f str,
        sequence: Option<Sequence>,
        numbering: &mut Numbering,
    ) -> Option<&'f str> {
        if let Some(at) = self.ahead
            && let Some(rest) = text.get(at..).filter(|rest| !rest.is_empty())
        {
            if rest.starts_with(fragment) {
                let to = at + fragment.len();
                self.ahead = (to < text.len()).then_some(to);
                if let Some(Sequence { number, .. }) = sequence
                    && self.numbered.last().is_none_or(|(last, _)| number > *last)
                {
                    self.numbered.push((number, at..to));
                }
                return None;
            }
            if let Some(past) = fragment.strip_prefix(rest) {
                self.ahead = None;
                return Some(past);
            }
        }
        if let Some(Sequence { number, in_order }) = sequence
            && *numbering != Numbering::Broken
        {
            let rising = *numbering == Numbering::Rising;
            if in_order {
                if rising && !self.numbered.is_empty() {
                    self.replayed = None;
                    return Some(fragment);
                }
            } else {
                let again = self
                    .numbered
                    .binary_search_by_key(&number, |(number, _)| *number)
                    .ok()
                    .and_then(|at| text.get(self.numbered[at].1.clone()))
                    .is_some_and(|text| text == fragment);
                if rising && again {
                    return None;
                }
                *numbering = Numbering::Broken;
            }
        }
        let Some(replayed) = self.replayed.take() else {
            return Some(fragment);
        };
        let rest = text.get(replayed..).filter(|rest| !rest.is_empty());
        match rest {
            Some(rest) if rest.starts_with(fragment) => {
                let replayed = replayed + fragment.len();
                self.replayed = (replayed < text.len()).then_some(replayed);
                None
            }
            Some(rest) if fragment.starts_with(rest) => Some(&fragment[rest.len()..]),
            _ => Some(fragment),
        }
    }

    /// Records that a final text was appended to `text` after its first `brought` bytes, which
    /// is where the deltas had got to: the deltas still to come repeat what it added. A final
    /// text that runs further ahead keeps the place an earlier one recorded.
    fn ran_ahead(&mut self, brought: usize) {
        self.ahead.get_or_insert(brought);
    }

    /// Records that a delta's new part was appended to `text`, which it now ends: under its
    /// `sequence_number`, the range of the text its whole `fragment` fills (the new part ends
    /// it, and a part the replay repeated comes just before it).
    fn appended(&mut self, text: &str, fragment: &str, sequence: Option<u64>) {
        let Some(number) = sequence else {
            return;
        };
        if !text.ends_with(fragment) {
            return;
        }
        let range = text.len() - fragment.len()..text.len();
        if self.numbered.last().is_none_or(|(last, _)| number > *last) {
            self.numbered.push((number, range));
        }
    }
}

impl StreamDecoder {
    /// The text of a finished `message` item: its `output_text` and `refusal` parts, each by its
    /// place in `content` (its `content_index`), completing the message's parts to them (see
    /// [`StreamDecoder::final_text`]).
    pub(super) fn finished_message(
        &mut self,
        item: &Item,
        output_index: Option<usize>,
        deltas: &mut Deltas,
    ) {
        let Some(Value::Array(parts)) = item.content.as_ref() else {
            return;
        };
        let texts: Vec<(u64, PartKind, &str)> = (0u64..)
            .zip(parts)
            .filter_map(|(index, part)| {
                let (kind, text) = kind_and_text(part)?;
                Some((index, kind, text))
            })
            .collect();
        self.final_text(item.id.as_deref(), output_index, &texts, deltas);
    }

    /// The final text of one message part, from the event that closes it
    /// (`response.output_text.done`, `response.refusal.done`, `response.content_part.done`):
    /// completes the part to it (see [`StreamDecoder::final_text`]). Text it adds counts as
    /// streamed, as a delta's would, for the finished items after it.
    pub(super) fn closed_part(
        &mut self,
        event: &Event<'_>,
        kind: PartKind,
        text: &str,
        deltas: &mut Deltas,
    ) {
        let index = event.content_index.unwrap_or(0);
        let texts = [(index, kind, text)];
        if self.final_text(event.item_id.as_deref(), event.output_index, &texts, deltas) {
            match event.item_id {
                Some(_) => self.streamed_keyed = true,
                None => self.streamed_unkeyed = true,
            }
        }
    }

    /// Completes a message's parts to the final text the server gives for them (`texts`, by
    /// `content_index`), and shows and keeps what that adds as the answer's text; whether it
    /// added any. The message is the one [`StreamDecoder::final_message`] finds.
    ///
    /// - A part that has text (from deltas, or an earlier final text) gets the rest of its final
    ///   text when that continues it (deltas the server never sent: vercel/ai#13836), and
    ///   nothing otherwise: what streamed was shown and stays.
    /// - A part without text gets all of its final text, unless the message has text of the same
    ///   kind (text, refusal) in another part (servers that number every delta's part 0 finish
    ///   with the parts apart, which would add the text twice; a refusal that streamed nowhere
    ///   is in no part, so it is kept after the text that did), or text streamed that names no
    ///   message this could be told apart from: any text without an item id, or, for a final
    ///   text without one, any text.
    ///
    /// So text that arrives only in a `.done` event or the finished item is kept, and the same
    /// text closed again (the part's `.done` events, then the finished item, each carry it) adds
    /// nothing. Deltas that arrive after a final text and repeat what it added add nothing
    /// either (see [`DeltaLog::fresh`]).
    fn final_text(
        &mut self,
        item_id: Option<&str>,
        output_index: Option<usize>,
        texts: &[(u64, PartKind, &str)],
        deltas: &mut Deltas,
    ) -> bool {
        let texts: Vec<(u64, PartKind, &str)> = texts
            .iter()
            .copied()
            .filter(|(_, _, text)| !text.is_empty())
            .collect();
        if texts.is_empty() {
            return false;
        }
        let streamed_elsewhere =
            self.streamed_unkeyed || (item_id.is_none() && self.streamed_keyed);
        let at = self.final_message(item_id, output_index, &texts);
        let message = &mut self.messages[at];
        let had_text = [PartKind::Text, PartKind::Refusal].map(|kind| message.has_text_of(kind));
        let mut added = Vec::new();
        for (index, kind, text) in texts {
            let had_text = had_text[usize::from(kind == PartKind::Refusal)];
            let recorded = message
                .parts
                .get(&index)
                .map_or("", |part| part.text.as_str());
            // What the final text brings past the part's own text: the text of the parts
            // after it that it repeats (parts numbered per delta) is not new.
            let (repeated, rest) = if !recorded.is_empty() {
                match text.strip_prefix(recorded) {
                    Some(rest) => {
                        let repeated = message.streamed_after(index, kind, rest);
                        (&rest[..repeated], Some(&rest[repeated..]))
                    }
                    None => ("", None),
                }
            } else if had_text || streamed_elsewhere {
                ("", None)
            } else {
                ("", Some(text))
            };
            if let Some(rest) = rest.filter(|rest| !rest.is_empty()) {
                let part = message.part(index);
                part.reached_by(kind);
                // Deltas the server sent before its final text may still arrive after it.
                part.deltas.ran_ahead(part.text.len());
                part.text.push_str(repeated);
                part.text.push_str(rest);
                added.push(rest);
            }
        }
        for rest in &added {
            self.session.text.push_str(rest);
            deltas.text(rest);
        }
        !added.is_empty()
    }

    /// The message a final text is about, recorded if new: the one its item id names; else,
    /// for an item id not seen before, the message at its output index when the final text
    /// continues what that message has (a server that finishes an item under another id than
    /// its deltas used: EricLBuehler/mistral.rs#1944), the new id then naming it too; else the
    /// message its id or output index names ([`StreamDecoder::message`]), or, for a final text
    /// that names neither, the one message such texts share.
    fn final_message(
        &mut self,
        item_id: Option<&str>,
        output_index: Option<usize>,
        texts: &[(u64, PartKind, &str)],
    ) -> usize {
        if let Some(id) = item_id {
            if let Some(&at) = self.message_by_id.get(id) {
                return at;
            }
            let at_index = output_index.and_then(|index| self.message_by_output.get(&index));
            if let Some(&at) = at_index.filter(|&&at| self.messages[at].continued_by(texts)) {
                self.message_by_id.insert(id.to_owned(), at);
                return at;
            }
        }
        if let Some(at) = self.message_at(item_id, output_index) {
            return at;
        }
        match self.nameless_message {
            Some(at) => at,
            None => {
                self.messages.push(MessageParts::default());
                let at = self.messages.len() - 1;
                self.nameless_message = Some(at);
                at
            }
        }
    }

    /// The delta log of the call at `position`, and its arguments.
    pub(super) fn argument_deltas(&mut self, position: usize) -> (&mut DeltaLog, &str) {
        if self.replays.len() <= position {
            self.replays.resize(position + 1, DeltaLog::default());
        }
        let arguments = self
            .session
            .calls
            .calls
            .get(position)
            .map_or("", |c| c.arguments.as_str());
        (&mut self.replays[position], arguments)
    }

    /// Applies an argument delta to the call at `position`: only its new part (see
    /// [`DeltaLog::fresh`]) is appended and shown.
    pub(super) fn argument_delta(
        &mut self,
        position: usize,
        fragment: &str,
        sequence: Option<Sequence>,
        deltas: &mut Deltas,
    ) -> Result<(), DecodeError> {
        let mut numbering = self.numbering;
        let (log, arguments) = self.argument_deltas(position);
        let fresh = log.fresh(arguments, fragment, sequence, &mut numbering);
        self.numbering = numbering;
        if let Some(fresh) = fresh {
            self.session
                .calls
                .apply(position, None, None, fresh, deltas)?;
            let (log, arguments) = self.argument_deltas(position);
            log.appended(arguments, fragment, sequence.map(|s| s.number));
        }
        Ok(())
    }

    /// The message item an event names, recorded if new; `None` when it names none. An event
    /// with an item id names that item; one without (a gateway that leaves `item_id` out of its
    /// deltas) names the message at its output index, so that the item announced there under
    /// its id and the deltas that name only its place are one message.
    fn message(
        &mut self,
        item_id: Option<&str>,
        output_index: Option<usize>,
    ) -> Option<&mut MessageParts> {
        let at = self.message_at(item_id, output_index)?;
        self.messages.get_mut(at)
    }

    /// Where in `messages` the message [`StreamDecoder::message`] finds is.
    fn message_at(&mut self, item_id: Option<&str>, output_index: Option<usize>) -> Option<usize> {
        let known = match item_id {
            Some(id) => self.message_by_id.get(id),
            None => self.message_by_output.get(&output_index?),
        };
        let at = match known {
            Some(&at) => at,
            None => {
                self.messages.push(MessageParts::default());
                let at = self.messages.len() - 1;
                if let Some(id) = item_id {
                    self.message_by_id.insert(id.to_owned(), at);
                }
                at
            }
        };
        if let Some(index) = output_index {
            self.message_by_output.entry(index).or_insert(at);
        }
        Some(at)
    }

    /// Applies a text (or refusal) delta: only its new part (see [`DeltaLog::fresh`]) is kept as
    /// the answer's text and shown. A delta names its part by its item (or output index) and
    /// `content_index` (0 when absent); one that names no item cannot be told from another, so
    /// all of it is new.
    pub(super) fn text_delta(
        &mut self,
        event: &Event<'_>,
        kind: PartKind,
        fragment: &str,
        sequence: Option<Sequence>,
        deltas: &mut Deltas,
    ) {
        let index = event.content_index.unwrap_or(0);
        let mut numbering = self.numbering;
        let fresh = match self.message(event.item_id.as_deref(), event.output_index) {
            Some(message) => {
                let part = message.part(index);
                part.reached_by(kind);
                let fresh = part
                    .deltas
                    .fresh(&part.text, fragment, sequence, &mut numbering);
                if let Some(fresh) = fresh {
                    part.text.push_str(fresh);
                    let number = sequence.map(|s| s.number);
                    part.deltas.appended(&part.text, fragment, number);
                }
                fresh
            }
            None => Some(fragment),
        };
        self.numbering = numbering;
        if let Some(fresh) = fresh.filter(|fresh| !fresh.is_empty()) {
            self.session.text.push_str(fresh);
            deltas.text(fresh);
        }
    }

    /// A `message` item announced (`response.output_item.added`). A new one announced under a
    /// number not above every earlier one shows that the stream's numbers cannot tell a replay,
    /// as a new call does (see [`StreamDecoder::open`]). One announced again, or after some of
    /// its text streamed (a gateway that replays events), starts a replay of each of its parts
    /// that has text, since the gateway may re-send their deltas too; the text the item carries
    /// for a part (normally none) counts as repeated. Each part takes its replay when it is next
    /// reached ([`MessageParts::part`]), so this does not visit the parts.
    pub(super) fn announce_message(
        &mut self,
        item: &Item,
        output_index: Option<usize>,
        in_order: bool,
    ) {
        let Some(message) = self.message(item.id.as_deref(), output_index) else {
            return;
        };
        let known = message.announced || !message.parts.is_empty();
        message.announced = true;
        if !known {
            self.numbering.broken_unless(in_order);
            return;
        }
        message.replays += 1;
        message.replayed_text = match &item.content {
            Some(Value::Array(parts)) => parts
                .iter()
                .map(|p| part_text(p).unwrap_or("").to_owned())
                .collect(),
            _ => Vec::new(),
        };
    }

    /// A message part announced (`response.content_part.added`). A part that already has text
    /// is announced again (a gateway that replays the part's events from there): that starts a
    /// replay of its text, as its item announced again does, and the text the part carries
    /// (normally none) counts as repeated. A new part needs nothing.
    pub(super) fn announce_part(&mut self, event: &Event<'_>) {
        let index = event.content_index.unwrap_or(0);
        let announced = event.part.as_ref().and_then(part_text).unwrap_or("");
        let Some(message) = self.message(event.item_id.as_deref(), event.output_index) else {
            return;
        };
        if message.parts.contains_key(&index) {
            let part = message.part(index);
            part.deltas.start_replay(&part.text, announced);
        }
    }

    /// Replaces the arguments of the call at `position` with the final text a `.done` event
    /// carries; a replay of the arguments they replace is over. An empty (or blank) final text
    /// replaces nothing: it is no JSON, so it cannot be the call's arguments, and bridges that
    /// build the final item from the announced one send `""` after the deltas. Final arguments
    /// that continue those the deltas brought run ahead of them: the deltas arriving after
    /// them that repeat the rest are not appended (see [`DeltaLog::fresh`]).
    pub(super) fn replace_arguments(
        &mut self,
        position: usize,
        arguments: &str,
    ) -> Result<(), DecodeError> {
        if arguments.trim().is_empty() {
            return Ok(());
        }
        let (log, streamed) = self.argument_deltas(position);
        log.replayed = None;
        if arguments.len() > streamed.len() && arguments.starts_with(streamed) {
            log.ran_ahead(streamed.len());
        }
        self.session.calls.replace_arguments(position, arguments)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message item announced again costs the same however many parts it has: no part is
    /// reached until its next event, which is when its replay starts. (A stream that announces
    /// an item of many parts over and over would otherwise do work quadratic in its length.)
    #[test]
    fn announcing_a_message_again_reaches_none_of_its_parts() {
        let added = r#"{"type":"response.output_item.added","item":{"type":"message","id":"m"}}"#;
        let mut stream = format!("data: {added}\n\n");
        for index in 0..4 {
            stream.push_str(&format!(
                "data: {{\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\
                 \"content_index\":{index},\"delta\":\"x\"}}\n\n"
            ));
        }
        stream.push_str(&format!("data: {added}\n\n"));
        let mut decoder = StreamDecoder::default();
        decoder.feed(stream.as_bytes()).unwrap();
        let parts = &decoder.messages[decoder.message_by_id["m"]].parts;
        assert_eq!(parts.len(), 4);
        assert!(parts.values().all(|part| part.deltas.replayed.is_none()));
        // The replay still starts when a part is reached: its delta again adds nothing.
        let again = "data: {\"type\":\"response.output_text.delta\",\"item_id\":\"m\",\
                     \"content_index\":2,\"delta\":\"x\"}\n\n";
        assert_eq!(decoder.feed(again.as_bytes()).unwrap(), []);
        assert_eq!(decoder.session.text, "xxxx");
    }
}
