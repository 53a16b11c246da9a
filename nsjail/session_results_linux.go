package nsjail

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"path"
)

// resultItem is one key of a MIMEBundle: its file extension, whether it
// travels in base64 (its file holds the decoded bytes), and the field.
type resultItem struct {
	key, ext string
	binary   bool
	field    func(*MIMEBundle) *string
}

// resultItems lists every MIME key of a bundle, in the bundle's order.
var resultItems = []resultItem{
	{"text", "txt", false, func(b *MIMEBundle) *string { return &b.Text }},
	{"html", "html", false, func(b *MIMEBundle) *string { return &b.HTML }},
	{"markdown", "md", false, func(b *MIMEBundle) *string { return &b.Markdown }},
	{"svg", "svg", false, func(b *MIMEBundle) *string { return &b.SVG }},
	{"png", "png", true, func(b *MIMEBundle) *string { return &b.PNG }},
	{"jpeg", "jpg", true, func(b *MIMEBundle) *string { return &b.JPEG }},
	{"json", "json", false, func(b *MIMEBundle) *string { return &b.JSON }},
	{"latex", "tex", false, func(b *MIMEBundle) *string { return &b.LaTeX }},
}

// largeItems are the items of b too large to be inline.
func largeItems(b *MIMEBundle) []resultItem {
	var out []resultItem
	for _, it := range resultItems {
		if len(*it.field(b)) > InlineResultBytes {
			out = append(out, it)
		}
	}
	return out
}

// resultPath is where item it of the cell's n-th result (from 1) goes.
func resultPath(cell uint32, n int, it resultItem) string {
	return path.Join(ResultsDir, fmt.Sprintf("%d-%d.%s", cell, n, it.ext))
}

// spillResults writes every result item over InlineResultBytes to its
// workspace file through the driver (PutFile: the path walked as any
// other, the bytes' size and sha256 the supervisor's, of what it sent),
// and puts {path, size, sha256} in its bundle instead. The workspace's
// size cap holds: an item that does not fit is dropped, its partial file
// removed, and the results say truncated and why. Then the live copies
// held back for it are made, in order.
func (ss *Session) spillResults(cl *cell) {
	ss.mu.Lock()
	// A copy: a frame that comes late (a thread of the cell's) may still
	// append to cl.results while the files are written.
	holding, heldAt, results := cl.holding, cl.heldAt, append([]MIMEBundle(nil), cl.results...)
	ss.mu.Unlock()
	if !holding {
		return
	}
	var why []string
	for i := heldAt; i < len(results); i++ {
		b := &results[i]
		for _, it := range largeItems(b) {
			f := it.field(b)
			data := []byte(*f)
			if it.binary {
				dec, err := base64.StdEncoding.DecodeString(*f)
				if err != nil {
					*f = ""
					why = append(why, fmt.Sprintf("results[%d].%s: not base64 (%v), dropped", i, it.key, err))
					continue
				}
				data = dec
			}
			*f = ""
			p := resultPath(cl.seq, i+1, it)
			sf, err := ss.PutFile(context.Background(), p, 0o644, bytes.NewReader(data))
			if err != nil {
				ss.DeleteFile(context.Background(), p)
				why = append(why, fmt.Sprintf("results[%d].%s (%d bytes): not written to %s: %v", i, it.key, len(data), p, err))
				continue
			}
			if b.Files == nil {
				b.Files = map[string]ResultFile{}
			}
			b.Files[it.key] = ResultFile{Path: sf.Path, Size: sf.Size, SHA256: sf.SHA256}
		}
	}
	ss.mu.Lock()
	copy(cl.results, results)
	if len(why) > 0 {
		cl.resultsCut = true
		for _, w := range why {
			if cl.resultsWhy != "" {
				cl.resultsWhy += "; "
			}
			cl.resultsWhy += w
		}
	}
	f := cl.onResult
	ss.mu.Unlock()
	if f != nil {
		for i := heldAt; i < len(results); i++ {
			f(&results[i], nil)
		}
	}
}
