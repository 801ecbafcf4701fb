// The built-in chat page (src/serve/chat_page.cpp) in a real browser: Debian's chromium, headless,
// driven by puppeteer-core (it downloads no browser). Run by tests/serve_chat_page_test.cpp:
//   PORT=8000 PROMPT=... SEED=7 TEMPERATURE=0.8 MAX_TOKENS=30 SHOT=out.png node page_check.mjs
// Types the settings and a message as a person would, waits for the streamed answer, then asks a
// long answer and presses Stop once text arrives. Prints one JSON line: the answer and reasoning
// the page shows, the status line after each, the page's errors.
import puppeteer from "puppeteer-core";

const env = process.env;
const browser = await puppeteer.launch({
  executablePath: env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const result = { errors: [] };
try {
  const page = await browser.newPage();
  page.on("pageerror", (e) => result.errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") result.errors.push(m.text()); });
  await page.setViewport({ width: 1000, height: 700 });
  await page.goto(`http://127.0.0.1:${env.PORT}/`, { waitUntil: "load" });
  await page.click("details.settings summary");
  // select a field's text and type over it, as a person would (Ctrl+A, then the new value)
  const retype = async (id, value) => {
    await page.focus(`#${id}`);
    await page.keyboard.down("Control");
    await page.keyboard.press("KeyA");
    await page.keyboard.up("Control");
    await page.keyboard.type(value);
  };
  for (const [id, value] of [["temperature", env.TEMPERATURE], ["max-tokens", env.MAX_TOKENS],
                             ["seed", env.SEED]])
    await retype(id, value);
  await page.click("details.settings summary");  // fold the settings away again
  await page.type("#input", env.PROMPT);
  await page.keyboard.press("Enter");
  await page.waitForSelector(".turn.assistant[data-done]", { timeout: 60000 });
  const turn = async (i) => page.$$eval(".turn.assistant", (ts, i) => ({
    answer: ts[i].querySelector(".text").textContent,
    reasoning: ts[i].querySelector(".reasoning").textContent,
    done: ts[i].dataset.done,
  }), i);
  result.first = await turn(0);
  result.status = await page.$eval("#status", (e) => e.textContent);
  if (env.SHOT) await page.screenshot({ path: env.SHOT });
  // a long answer (hot, 3000 tokens at most), stopped once it has started
  await page.click("details.settings summary");
  await retype("max-tokens", "3000");
  await retype("temperature", "2");  // hot: the end-of-text token is rarely drawn
  await page.click("details.settings summary");
  await page.type("#input", "Tell me a very long story.");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => {
    const ts = document.querySelectorAll(".turn.assistant");
    const t = ts[ts.length - 1];
    return t && (t.querySelector(".text").textContent.length > 0 ||
                 t.querySelector(".reasoning").textContent.length > 0);
  }, { timeout: 60000 });
  await page.click("#stop");
  await page.waitForSelector(".turn.assistant:nth-of-type(4)[data-done]", { timeout: 20000 });
  result.second = await turn(1);
} catch (e) {
  result.errors.push(String(e && e.stack || e));
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
