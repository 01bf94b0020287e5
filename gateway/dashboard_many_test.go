package gateway_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardThousandsOfHomes registers 5,000 homes through the admin
// API of a real gateway and drives the dashboard in headless Chromium:
// the first page shows 50 of them, the next page the following 50, a
// search finds one home among them, and a suspend asks for confirmation
// before it runs.
//
// It does not run in parallel: registering 5,000 homes loads the machine
// enough to slow the browser tests beside it past their hang guard.
func TestDashboardThousandsOfHomes(t *testing.T) {
	const n = 5000
	a := admStart(t, admDemo, "")
	var wg sync.WaitGroup
	ids := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				if code, _, body := a.do(t, "PUT", "/admin/homes/"+id, admToken, nil, map[string]string{"target": id}); code != http.StatusCreated {
					t.Errorf("register %s: %d %s", id, code, body)
				}
			}
		}()
	}
	for i := range n {
		ids <- fmt.Sprintf("u%05d", i)
	}
	close(ids)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// The browser's hang guard starts once the homes are registered: on a
	// busy machine the registrations alone can take most of it.
	ctx := admBrowser(t)
	rows := `document.querySelectorAll("#homes tbody tr").length`
	err := admLogin(ctx, a, `button[data-detail="demo"]`)
	var count1, count2, found, armed string
	if err == nil {
		err = chromedp.Do(ctx,
			admPoll(rows+` === 50`),
			admPoll(`document.getElementById("home-count").textContent.indexOf("of 5001") >= 0`))
	}
	if err == nil {
		count1, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#home-count`)))
	}
	if err == nil {
		err = chromedp.Do(ctx,
			admClick(`#home-next`),
			admPoll(`!!document.querySelector('tr[data-home="u00049"]') && `+rows+` === 50`),
			admClick(`#home-prev`),
			admPoll(`!!document.querySelector('tr[data-home="demo"]')`),
			admClick(`#home-next`),
			admPoll(`!!document.querySelector('tr[data-home="u00049"]')`))
	}
	if err == nil {
		count2, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#home-count`)))
	}
	if err == nil {
		err = chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS(`#home-q`), "u04321"),
			admPoll(rows+` === 1 && !!document.querySelector('tr[data-home="u04321"]')`),
			admClick(`button[aria-label="Suspend home u04321"]`),
			admPoll(`!!document.querySelector('button[aria-label="Confirm suspend of home u04321"]')`))
	}
	if err == nil {
		found, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#home-count`)))
	}
	if err == nil {
		armed, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-home="u04321"] button[data-action="suspend"]`)))
	}
	if err == nil {
		err = chromedp.Do(ctx,
			admClick(`button[aria-label="Confirm suspend of home u04321"]`),
			admPoll(`!!document.querySelector('button[aria-label="Suspend home u04321"]')`))
	}
	admScreenshot(t, ctx, "dashboard-many.png")
	if err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if !strings.Contains(count1, "1–50 of 5001") || !strings.Contains(count2, "51–100 of 5001") || !strings.Contains(found, "1–1 of 1") {
		t.Errorf("page counts %q, %q, search %q", count1, count2, found)
	}
	if armed != "Confirm suspend" {
		t.Errorf("the first press on suspend shows %q, want a confirmation", armed)
	}
}
