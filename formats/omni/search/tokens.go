package search

import (
	"strings"
	"unicode"
)

// maxTokens bounds the tokens taken from one field.
const maxTokens = 512

// tokens splits s into lower-case terms: runs of letters and digits, and
// for a word joined by '_', '-' or '.' (sea_surface_temperature) the
// whole word too, so that an exact standard name outranks its parts.
func tokens(s string) []string {
	var out []string
	for _, word := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' && r != '.'
	}) {
		parts := strings.FieldsFunc(word, func(r rune) bool { return r == '_' || r == '-' || r == '.' })
		out = append(out, parts...)
		if len(parts) > 1 {
			out = append(out, strings.Join(parts, "_"))
		}
		if len(out) >= maxTokens {
			return out[:maxTokens]
		}
	}
	return out
}
