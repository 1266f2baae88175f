#!/usr/bin/python3
"""The studio in a real browser: headless Chromium, driven by Selenium.

Trains a small d2l-preset translator with `tformer train`, serves it with
`tformer serve` on a free loopback port, and as a person would: types a
sentence, translates it, waits for the translation and the attention grid,
hovers a token and checks the highlighted row, switches to "Inside one
layer" with the keyboard and walks through it, makes the server refuse a
sentence too long for the model, whose message must read in plain words,
watches the loss of a training run that starts while the page is open, and
reads a small whole-corpus translator's validation figures (BLEU, chrF2, BLEU
by source length, the loss on validation and training pairs) on the Model tab.
Screenshots go to --out (studio.png: the translation and the attention grid).

Where Chromium, its driver or Selenium cannot start, the test fails: it is
never skipped (scripts/install-deps.sh --browser installs them).

  python3 tests/apps/studio_browser.py --tformer build/release/apps/tformer --out build/release/studio
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1366,1100",
]


def fail(message):
    print(f"studio_browser: FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def start_browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        fail(f"Selenium is missing ({e}); bash scripts/install-deps.sh --browser installs python3-selenium")
    for path in ("/usr/bin/chromium", "/usr/bin/chromedriver"):
        if not os.path.exists(path):
            fail(f"{path} is missing; bash scripts/install-deps.sh --browser installs chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument("--user-data-dir=" + tempfile.mkdtemp(prefix="tformer-chromium-"))
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    except Exception as e:  # noqa: BLE001 - whatever stops Chromium from starting fails the test
        fail(f"Chromium did not start: {e}")


def train(tformer, out):
    run = subprocess.run([tformer, "train", "translate", "--preset", "d2l", "--epochs", "40", "--threads", "1",
                          "--quiet", "--overwrite", "--out", out], capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        fail(f"tformer train failed:\n{run.stdout}{run.stderr}")
    return os.path.join(out, "checkpoint.safetensors")


def train_pieces(tformer, out):
    """A tiny whole-corpus translator (SentencePiece, a validation split): seconds."""
    run = subprocess.run([tformer, "train", "translate", "--sample-size", "2000", "--steps", "30", "--warmup", "5",
                          "--num-hiddens", "16", "--ffn-num-hiddens", "32", "--num-heads", "2", "--vocab-size", "200",
                          "--val-sentences", "20", "--threads", "1", "--quiet", "--overwrite", "--out", out],
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        fail(f"tformer train failed:\n{run.stdout}{run.stderr}")
    return os.path.join(out, "checkpoint.safetensors")


def serve(tformer, checkpoints, run_dirs, log):
    """`tformer serve` on a free port with one checkpoint (a path) or several (a list)."""
    models = [flag for c in ([checkpoints] if isinstance(checkpoints, str) else checkpoints)
              for flag in ("--checkpoint", c)]
    runs = [flag for d in run_dirs for flag in ("--run", d)]
    server = subprocess.Popen([tformer, "serve", *models, *runs, "--port", "0"],
                              stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        with open(log.name) as f:
            m = re.search(r"the page: (http://127\.0\.0\.1:[0-9]+/)", f.read())
        if m:
            return server, m.group(1)
        if server.poll() is not None:
            break
        time.sleep(0.1)
    server.kill()
    with open(log.name) as f:
        fail(f"tformer serve did not start:\n{f.read()}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tformer", required=True)
    parser.add_argument("--out", required=True)
    a = parser.parse_args()
    os.makedirs(a.out, exist_ok=True)
    checkpoint = train(a.tformer, os.path.join(a.out, "model"))
    pieces = train_pieces(a.tformer, os.path.join(a.out, "pieces"))
    log = open(os.path.join(a.out, "serve.log"), "w")
    live = os.path.join(a.out, "live")  # a run that starts while the page watches it
    shutil.rmtree(live, ignore_errors=True)
    os.makedirs(live)
    server, url = serve(a.tformer, [checkpoint, pieces], [os.path.join(a.out, "model"), live], log)
    driver = None
    try:
        driver = start_browser()
        check_page(driver, url, a.out)
        check_training(driver, a.tformer, live, a.out)
        check_model_figures(driver, a.out)
    finally:
        if driver is not None:
            driver.quit()
        server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=60)
        if code != 0:
            fail(f"tformer serve exited with {code} on SIGTERM")
    print("studio_browser: 1 passed, 0 failed")


def check_page(d, url, out):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(d, 60)
    d.get(url)
    wait.until(lambda d: "parameters" in d.find_element(By.ID, "model-summary").text)

    # type a sentence and translate it with the keyboard (Ctrl+Enter in the text box)
    text = d.find_element(By.ID, "text")
    text.clear()
    text.send_keys("i'm home .")
    text.send_keys(Keys.CONTROL, Keys.ENTER)
    # the page translated its own example on loading; wait for the answer to this sentence (the
    # results are redrawn as answers arrive, so an element found may be replaced before it is read)
    def shown(d):
        try:
            source = d.find_element(By.CSS_SELECTOR, "#results .result .source").text
            translation = d.find_element(By.CSS_SELECTOR, "#results .translation").text
        except (StaleElementReferenceException, NoSuchElementException):
            return None
        return (source, translation) if source == "i'm home ." else None

    try:
        source, translation = wait.until(shown)
    except TimeoutException:
        fail("the translation of \"i'm home .\" did not appear within 60 s")
    if source != "i'm home ." or not translation:
        fail(f"the translation box shows {source!r} -> {translation!r}")
    print(f"studio_browser: {source} -> {translation}")

    # the attention grid: 2 layers × (4 heads + their average)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#attention-grid .thumb")) == 2 * 5)
    heads = [e.text for e in d.find_elements(By.CSS_SELECTOR, "#attention-grid .col-head")]
    if heads != ["head 1", "head 2", "head 3", "head 4", "average"]:
        fail(f"the grid's columns are {heads}")

    # hover a token: its row is highlighted, and the readout says what it attends to
    row_tokens = [t for t in d.find_elements(By.CSS_SELECTOR, "#attention-map svg .token")
                  if "column" not in t.get_attribute("aria-label")]
    if len(row_tokens) != 4:  # i'm home . <eos>: d2l's padding is left out
        fail(f"the map has {len(row_tokens)} row labels, expected 4")
    ActionChains(d).move_to_element(row_tokens[1]).perform()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#attention-map rect.hl-row"))
    rows = {r.get_attribute("data-row") for r in d.find_elements(By.CSS_SELECTOR, "#attention-map rect.hl-row")}
    cells = len(d.find_elements(By.CSS_SELECTOR, "#attention-map rect.hl-row"))
    if rows != {"1"} or cells != 4:
        fail(f"hovering row 2 highlighted rows {rows} ({cells} cells)")
    readout = d.find_element(By.ID, "attention-readout").text
    if "home" not in readout or "attends most to" not in readout:
        fail(f"the readout says {readout!r}")
    # a head chosen with the keyboard: Tab to a thumbnail, Enter
    thumb = d.find_elements(By.CSS_SELECTOR, "#attention-grid .thumb")[6]  # layer 2, head 2
    thumb.send_keys(Keys.ENTER)
    wait.until(lambda d: "layer 2, head 2" in d.find_element(By.ID, "attention-title").text)
    ActionChains(d).move_to_element(d.find_elements(By.CSS_SELECTOR, "#attention-map svg .token")[2]).perform()
    time.sleep(0.3)
    d.save_screenshot(os.path.join(out, "studio.png"))

    # "Inside one layer", reached with the arrow keys from the Attention tab
    d.find_element(By.ID, "tab-attention").click()
    for _ in range(2):
        d.switch_to.active_element.send_keys(Keys.ARROW_RIGHT)
    if d.find_element(By.ID, "tab-inside").get_attribute("aria-selected") != "true":
        fail("the arrow keys did not reach the 'Inside one layer' tab")
    box = d.find_element(By.ID, "inside-text")
    box.clear()
    box.send_keys("i'm home .", Keys.ENTER)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#inside-steps button")) == 11)
    title = d.find_element(By.ID, "step-title").text
    if not title.startswith("Step 1 of 11: Embedding"):
        fail(f"the walk starts with {title!r}")
    d.find_element(By.ID, "step-next").click()
    if not d.find_element(By.ID, "step-title").text.startswith("Step 2 of 11: Queries, per head"):
        fail(f"Next step shows {d.find_element(By.ID, 'step-title').text!r}")
    d.find_elements(By.CSS_SELECTOR, "#inside-steps button")[5].click()
    if "(4, 10, 10)" not in d.find_element(By.ID, "step-shape").text:  # 4 heads, d2l's 10 padded positions
        fail(f"the weights' shape reads {d.find_element(By.ID, 'step-shape').text!r}")
    if len(d.find_elements(By.CSS_SELECTOR, "#step-map figure")) != 4:
        fail("the weights are not drawn once per head")
    section = d.find_element(By.ID, "step-section").text
    if "seed 003" not in section:
        fail(f"the step names the section {section!r}")
    d.save_screenshot(os.path.join(out, "studio-inside.png"))

    # an error in plain words: a sentence longer than the model's 10 tokens
    text = d.find_element(By.ID, "text")
    text.clear()
    text.send_keys("go . go . go . go . go . go .")
    d.find_element(By.ID, "translate").click()
    wait.until(lambda d: d.find_element(By.ID, "status").is_displayed())
    status = d.find_element(By.ID, "status").text
    if not status.startswith("The model cannot read this: sentence 1 is 13 tokens long") or "at most 10" not in status:
        fail(f"the error reads {status!r}")
    d.save_screenshot(os.path.join(out, "studio-error.png"))

    # the page broke no rule of its Content-Security-Policy and threw nothing
    problems = [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"
                and "422" not in e["message"]]  # the refused translation, logged by the browser as a failed request
    if problems:
        fail("the browser console has errors:\n" + "\n".join(problems))


def check_training(d, tformer, live, out):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    d.find_element(By.ID, "tab-training").click()
    WebDriverWait(d, 30).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#run option")) == 2)
    Select(d.find_element(By.ID, "run")).select_by_value("1")
    WebDriverWait(d, 30).until(lambda d: "No steps yet" in d.find_element(By.ID, "run-status").text)
    trainer = subprocess.Popen([tformer, "train", "copy", "--epochs", "30", "--threads", "1", "--quiet",
                                "--out", live], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        # the steps arrive as server-sent events and the chart follows them
        WebDriverWait(d, 120).until(
            lambda d: re.search(r"Training now: step ([0-9,]+)", d.find_element(By.ID, "run-status").text))
        first = int(re.search(r"step ([0-9,]+)", d.find_element(By.ID, "run-status").text).group(1).replace(",", ""))
        WebDriverWait(d, 120).until(lambda d: int(re.search(r"step ([0-9,]+)", d.find_element(
            By.ID, "run-status").text).group(1).replace(",", "")) > first)
        if not d.find_elements(By.CSS_SELECTOR, "#loss-chart polyline.series.steps"):
            fail("the loss chart has no line")
        d.save_screenshot(os.path.join(out, "studio-training.png"))
    finally:
        trainer.wait(timeout=300)


def check_model_figures(d, out):
    """The second model's Model tab: the validation figures its summary.txt gives, per decoding, and the loss."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    Select(d.find_element(By.ID, "model")).select_by_value("1")
    WebDriverWait(d, 30).until(lambda d: "Translator" in d.find_element(By.ID, "model-summary").text
                               and "d 16" in d.find_element(By.ID, "model-summary").text)
    d.find_element(By.ID, "tab-model").click()
    info = d.find_element(By.ID, "model-info").text
    for decoding in ("beam 4", "greedy"):
        for figure in ("validation BLEU", "validation chrF2"):
            if not re.search(rf"{figure}, {decoding} [0-9]+\.[0-9][0-9]", info):
                fail(f"the Model tab does not give the {figure}, {decoding}:\n{info}")
        m = re.search(rf"BLEU by source length, {decoding} (.*)", info)
        if not m or not re.search(r"(1-5|6-10|11-20|21\+) words: [0-9]+\.[0-9][0-9] \([0-9]+ sentences\)", m.group(1)):
            fail(f"the Model tab does not give BLEU by source length, {decoding}:\n{info}")
    if not re.search(r"loss per token, validation / training pairs [0-9]+\.[0-9]{4} / [0-9]+\.[0-9]{4}", info):
        fail(f"the Model tab does not give the loss on validation and training pairs:\n{info}")
    training = [h for h in d.find_elements(By.CSS_SELECTOR, "#model-info h3") if h.text == "Training"]
    if training:
        d.execute_script("arguments[0].scrollIntoView()", training[0])
    d.save_screenshot(os.path.join(out, "studio-model.png"))


if __name__ == "__main__":
    main()
