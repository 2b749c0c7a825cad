// Package nlp compiles scheduling policy written in English or Chinese
// sentences into a policydoc.Document, offline and deterministically.
//
// The grammar is a lexicon (lexicon.go: every word or phrase the compiler
// knows, in both languages, mapped to a typed token: modality, relation,
// scope, threshold direction, units, times, pod and node words) and a
// small set of clause rules (compile.go). Text is split into clauses on
// sentence ends, "but"/"但是", semicolons and, in Chinese, commas; each
// clause is tokenised (English by words, with multi-word phrases matched
// longest first; Chinese by longest match over the same lexicon, with no
// dictionary download: ASCII runs inside Chinese text are read as English
// words, and Chinese numerals are parsed), every token must be placed, and
// the tokens decide exactly one rule. A clause that leaves a word
// unplaced, names two constraints, or is ambiguous ("should", "or",
// "near") is refused with an Error that quotes the words and says what was
// expected; the compiler never picks a reading for the operator.
//
// Names: services, zones and GPU models come from a Glossary (the default
// one knows common microservice names and their Chinese names, and GPU
// models; edgectl adds a simulator scenario's names); an unknown ASCII
// name is read as a service when "service"/"服务" follows it, and as a
// zone after "zone"/"区域". A role word decides over the glossary for the
// name right after it: "in zone checkout" is a zone even though checkout
// is a known service (only after "in"/在), "east service" a service even
// where east is a known zone; a list it begins goes on after "and" or a
// comma only to unknown names, names of its role and quoted names. A
// quoted name
// ("a", "order") is a name as written: never a policy word ("a" is an
// article) nor an alias ("order" is otherwise "orders").
//
// Rendering: RenderRule (Render for a document) writes a rule as an
// English and a Chinese sentence that Compile, with the same glossary,
// reads back into the rule, and checks it by compiling them: names plain
// (policydoc.Rule.English and Chinese) when that reads back, else every
// service marked ("checkout service"), else every name also quoted. A rule
// no sentence carries, because a GPU model (which has no role word) reads
// as a service or a zone, is spelt otherwise there, or is not in it, is
// refused with an error wrapping ErrUnrenderable that names the model.
// Compile gives every rule its RenderRule sentences. Both directions are
// tested on the corpus and on name clashes, and fuzzed (FuzzCompile,
// FuzzRender).
//
// Concurrency: Compile keeps no state between calls and is safe for
// concurrent use; a Glossary must not be modified while Compile reads it.
package nlp
