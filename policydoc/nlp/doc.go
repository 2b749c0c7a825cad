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
// models; Glossary.FromEnv adds a simulator scenario's names); an unknown
// ASCII name is read as a service when "service"/"服务" follows it, and as
// a zone after "zone"/"区域".
//
// Every compiled rule is rendered back by policydoc.Rule.English and
// Chinese; both renderings compile to the same rule (tested).
//
// Concurrency: Compile keeps no state between calls and is safe for
// concurrent use; a Glossary must not be modified while Compile reads it.
package nlp
