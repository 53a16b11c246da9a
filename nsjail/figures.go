package nsjail

import (
	"encoding/base64"
	"fmt"
)

// takeFigures puts the figures the runner rendered (warm_driver.py,
// _sbx_figures) into Result.Results, as MIME bundles with a png, when
// this run asked for them (Payload.FigureBytes). The supervisor trusts
// none of them: each must be a PNG (its signature and IHDR, as
// png.DecodeConfig reads them, figures_png.go), together within the run's budget and
// MaxFigures. A payload can connect to the runner's report itself, but
// it gets no more than it would by leaving a figure open: a PNG image,
// within the same caps.
func (s *supervisor) takeFigures(exit *StatusMsg) {
	if exit == nil || s.figureBytes <= 0 || (len(exit.Figures) == 0 && !exit.FiguresCut) {
		return
	}
	res := s.res
	budget := s.figureBytes
	cut, why := exit.FiguresCut, ""
	if cut {
		why = "the runner left some out (output cap or count)"
	}
	for i, b := range exit.Figures {
		if len(res.Results) >= maxFigures || int64(len(b)) > budget {
			cut, why = true, fmt.Sprintf("figure %d and later: past the output cap (%d bytes) or %d figures", i+1, s.figureBytes, maxFigures)
			break
		}
		if err := checkPNG(b); err != nil {
			cut, why = true, fmt.Sprintf("figure %d dropped: not a PNG (%v)", i+1, err)
			continue
		}
		budget -= int64(len(b))
		res.Results = append(res.Results, MIMEBundle{PNG: base64.StdEncoding.EncodeToString(b)})
	}
	if cut {
		res.ResultsTruncated = true
		s.warnings = append(s.warnings, "results truncated: "+why)
	}
}
