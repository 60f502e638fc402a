// Prints robfig/cron v3's answers (as KubeRay's RayCronJob uses it: ParseStandard, then Next) for
// the cases on standard input, one JSON object a line: {"spec", "zone", "after"} in, the same with
// "next" (RFC 3339 UTC, "" for none) or "error" out.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/robfig/cron/v3"
)

type vector struct {
	Spec  string `json:"spec"`
	Zone  string `json:"zone"`
	After string `json:"after"`
	Next  string `json:"next,omitempty"`
	Error string `json:"error,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var v vector
		if err := json.Unmarshal(in.Bytes(), &v); err != nil {
			panic(err)
		}
		loc, err := time.LoadLocation(v.Zone)
		if err != nil {
			panic(err)
		}
		time.Local = loc // the zone a schedule without a prefix is read in
		after, err := time.Parse(time.RFC3339, v.After)
		if err != nil {
			panic(err)
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					v.Error = fmt.Sprintf("panic: %v", r)
				}
			}()
			schedule, err := cron.ParseStandard(v.Spec)
			if err != nil {
				v.Error = err.Error()
				return
			}
			next := schedule.Next(after.In(loc))
			if !next.IsZero() {
				v.Next = next.UTC().Format(time.RFC3339)
			}
		}()
		if err := out.Encode(v); err != nil {
			panic(err)
		}
	}
}
