// The interactive figures (ddpdemo/interactive.py) in Chinese on a Chinese
// page (issue 27): titles, legends, controls, step names and what the live
// region says, aria labels included. ddpdemo.book.zhfigures adds this file
// to the Chinese site's pages that carry a figure.
//
// The figures are notebook outputs, the same in both editions, and strict
// nbval compares them, so they stay English; this script translates what
// they show instead, on pages whose <html lang> is Chinese: once when the
// page is parsed, then whatever a figure writes as the reader moves
// through it (a MutationObserver answers before the page is painted or
// read aloud). Every string a figure can write is matched whole, as
// interactive.py writes it; one that matches nothing stays English and is
// named in the figure's data-untranslated attribute (tests/test_site.py
// checks none is), so a new sentence there needs its rule here. The
// ledger's finding is not matched but rendered (`finding`), from the data
// its figure carries (ddpdemo.runtime.ledger.Finding) beside its English.
// Vocabulary: i18n/zh/terms.md.

(function () {
  "use strict";
  if (!/^zh/i.test(document.documentElement.lang)) return;

  var ATTRIBUTES = ["aria-label", "aria-valuetext", "data-say"];
  var HAN = /[\u3400-\u9fff]/;

  // Whole strings: the figures' fixed words and the chapters' own labels.
  var WORDS = {
    "Play": "播放",
    "Pause": "暂停",
    "start": "开始",
    "step of the ring": "环形 all-reduce 的步骤",
    ["outlined: the chunk a rank sends; bold: the chunk it just received; " +
      "filled: holds the final sum"]:
      "描边是 rank 发出的分块，粗体是刚收到的分块，填色是已经完整的和",
    "no chunk holds the final sum yet": "还没有分块持有完整的和",
    "seconds": "秒",
    "milliseconds": "毫秒",
    "milliseconds since this rank's backward started":
      "毫秒，从这个 rank 的反向传播开始算起",
    ["Hover over a bar or a mark, or focus it with Tab, to read a rank's " +
      "event."]: "把鼠标悬停在某个条或标记上，或用 Tab 键聚焦它，即可读到" +
      "这个 rank 的事件。",
    ["Hover over a bucket or a gradient's mark, or focus it with Tab, to " +
      "read it."]: "把鼠标悬停在某个桶或某个梯度的标记上，或用 Tab 键聚焦" +
      "它，即可读到它。",
    "computing gradients": "计算梯度",
    "a bucket's all_reduce": "桶的 all_reduce",
    "(dead)": "（已退出）",
    "(no answer)": "（无应答）",
    // default titles (interactive.py)
    "ring all-reduce, step by step": "环形 all-reduce，一步一步",
    "Backward and the buckets' all_reduce": "反向传播与各个桶的 all_reduce",
    "Flight Recorder ledger, rank by rank":
      "Flight Recorder 记录表（ledger），逐个 rank",
    // chapter 3's figure
    "dist.barrier(), rank by rank": "dist.barrier()，逐个 rank",
    "work (sleep)": "工作（睡眠）",
    "in dist.barrier()": "在 dist.barrier() 中",
    "left": "离开"
  };

  var UNIT = {s: "秒", ms: "毫秒"};

  // A pattern from pieces of its source; a last piece "g" is its flag.
  function join() {
    var parts = Array.prototype.slice.call(arguments);
    var flags = parts[parts.length - 1] === "g" ? parts.pop() : "";
    return new RegExp(parts.join(""), flags);
  }
  function each(re, text, say, sep) { // every match of a /g pattern, said
    var out = [], m;
    while ((m = re.exec(text)) !== null) out.push(say(m));
    return out.join(sep || "；");
  }

  // Sentences, matched whole: [pattern, its Chinese from the match].
  var RULES = [
    [/^rank (\d+)$/, function (m) { return m[0]; }],
    [/^rank (\d+) gradients$/, function (m) { return "rank " + m[1] +
      " 梯度"; }],
    [/^rank (\d+) all_reduce$/, function (m) { return m[0]; }],
    // the ring (chapter 1)
    [/^ring all-reduce on (\d+) ranks, one step at a time$/,
      function (m) { return m[1] + " 个 rank 上的环形 all-reduce，一次一步"; }],
    [/^(reduce-scatter|all-gather) (\d+)$/, function (m) {
      return m[1] + " 第 " + m[2] + " 步"; }],
    [/^chunk (\d+)$/, function (m) { return "分块 " + m[1]; }],
    [join("^start: each rank holds only its own values, in all (\\d+) ",
          "chunks; (.+)\\.$"),
      function (m) { return "开始：每个 rank 的 " + m[1] +
        " 个分块里都只有它自己的值；" + tr(m[2]) + "。"; }],
    [/^(\S+ \d+) \(step (\d+) of (\d+)\): (.+)\. After it, (.+)\.$/,
      function (m) {
        return tr(m[1]) + "（全部 " + m[3] + " 步中的第 " + m[2] + " 步）：" +
          each(join("rank (\\d+) sends chunk (\\d+) \\(([^)]*)\\) to rank ",
                    "(\\d+), which (adds it into|copies it to) its chunk ",
                    "(\\d+)", "g"), m[4], function (s) {
              return "rank " + s[1] + " 把分块 " + s[2] + "（" + s[3] +
                "）发给 rank " + s[4] + "，rank " + s[4] +
                (s[5] === "adds it into" ? " 把它加到自己的分块 " + s[6] + " 上"
                  : " 把它复制到自己的分块 " + s[6]);
            }) + "。这一步之后，" + tr(m[5]) + "。";
      }],
    [/^chunks that hold the final sum: (.+)$/, function (m) {
      return "已持有完整的和的分块：" + each(/rank (\d+) (\[[\d, ]*\])/g,
        m[1], function (s) { return "rank " + s[1] + " " + s[2]; }, "、"); }],
    // timelines (chapters 3 and 7): a bar, a mark, their labels
    [/^(.+): from (\S+) to (\S+) (s|ms) \(took (\S+) (?:s|ms)\)$/,
      function (m) { return tr(m[1]) + "：从 " + m[2] + " 到 " + m[3] + " " +
        UNIT[m[4]] + "（用时 " + m[5] + " " + UNIT[m[4]] + "）"; }],
    [/^(.+) at (\S+) (s|ms)$/, function (m) { return tr(m[1]) + "（" + m[2] +
      " " + UNIT[m[3]] + "时）"; }],
    [/^bucket (\d+)'s all_reduce$/, function (m) { return "桶 " + m[1] +
      " 的 all_reduce"; }],
    [/^gradient of (\S+) ready$/, function (m) { return m[1] +
      " 的梯度就绪"; }],
    // the ledger (chapter 5): a cell's sentence
    [join("^rank (\\d+), collective #(\\d+): (\\S+) (\\S+?)(?: of (.+?))?, ",
          "state (\\S+), (retired \\(done\\)|pending \\(not done\\))",
          "(?:, called from (.+))?\\.$"),
      function (m) {
        return "rank " + m[1] + "，集合通信 #" + m[2] + "：" + m[3] + " " +
          m[4] + (m[5] ? "（" + m[5] + "）" : "") + "，状态 " + m[6] + "，" +
          (m[7][0] === "r" ? "已完成（retired）" : "未完成（pending）") +
          (m[8] ? "，调用位置 " + m[8] : "") + "。";
      }],
    [/^rank (\d+), collective #(\d+): never called; it stopped at #(\d+)\.$/,
      function (m) { return "rank " + m[1] + "，集合通信 #" + m[2] +
        "：从未调用；它停在了 #" + m[3] + "。"; }],
    [/^rank (\d+), collective #(\d+): never called; none\.$/,
      function (m) { return "rank " + m[1] + "，集合通信 #" + m[2] +
        "：从未调用；它没有记录任何集合通信。"; }],
    [/^rank (\d+) died; its ledger died with it\.$/, function (m) {
      return "rank " + m[1] + " 已退出，它的记录表也随之丢失。"; }],
    [/^rank (\d+) did not answer\.$/, function (m) {
      return "rank " + m[1] + " 没有应答。"; }],
    // last: a rank's event, "rank 1, " and a label or sentence above
    [/^rank (\d+), (.+)$/, function (m) { return "rank " + m[1] + "，" +
      tr(m[2]); }]
  ];

  // The ledger's finding in Chinese, from its data (ledger.Finding,
  // where each kind and field is described; Finding.sentence writes the
  // English from the same data).
  function rankList(rs) {                 // errors.ranks_text, in Chinese
    return rs.length === 1 ? "rank " + rs[0] : "rank [" + rs.join(", ") + "]";
  }
  function called(c) { return c.op + (c.what ? " " + c.what : ""); }
  function finding(d) {
    switch (d.kind) {
      case "off":
        return rankList(d.ranks) + " 上的 Flight Recorder 已关闭（缓冲区大小为 " +
          "0），所以没有记录任何集合通信，也就没有记录表可以比较。";
      case "unanswered":
        return "没有 rank 应答，所以没有记录表可以比较。";
      case "disagree":
        return "各 rank 在集合通信 #" + d.seq + " 处不一致：" +
          d.ops.map(function (c) {
            return rankList(c.ranks) + " 上是 " + called(c); }).join("；") +
          "。";
      case "missing":
        return rankList(d.ops[0].ranks) + " 到达了集合通信 #" + d.seq + "（" +
          d.ops[0].op + "），而 " + rankList(d.ranks) + " 从未调用它：" +
          d.stopped.map(function (s) {
            return "rank " + s.rank + (s.seq ? " 停在了 #" + s.seq + "（" +
              s.op + "）" : " 没有记录任何集合通信"); }).join("；") + "。";
      case "dead":
        return rankList(d.ranks) + " 已退出，它的记录表也随之丢失；其余 rank " +
          "都到达了集合通信 #" + d.seq + "（" + d.ops[0].op + "），到此为止都一致。";
      case "silent":
        return rankList(d.ranks) + " 没有应答；其余 rank 到集合通信 #" + d.seq +
          " 为止都一致。";
      case "empty":
        return "还没有记录任何集合通信。";
      case "agree":
        return "没有分歧：每个 rank 都按相同的顺序记录了相同的集合通信，#" +
          d.first + " 到 #" + d.seq + "。" + (d.sites.length ? "但 #" +
          d.site_seq + " 配对的调用位置不同：" + d.sites.map(function (s) {
            return rankList(s.ranks) + " 上是 " + s.site; }).join("；") +
          "。" : "");
    }
    return null;                          // a kind this script predates
  }

  var missed = null;                  // the figure being translated's list
  var shown = null;                   // its data (the ledger's: a finding)

  // The Chinese of one string a figure shows; the string itself when it
  // needs none (no Latin word: numbers, "#2", "-"; or Chinese already).
  function tr(text) {
    if (!/[A-Za-z]{2}/.test(text) || HAN.test(text)) return text;
    // the ledger's sentence is capitalised where it opens the live line
    var lower = text[0].toLowerCase() + text.slice(1);
    if (shown && shown.finding && lower === shown.divergence) {
      var zh = finding(shown.finding);
      if (zh) return zh;
    }
    if (WORDS.hasOwnProperty(text)) return WORDS[text];
    if (WORDS.hasOwnProperty(lower)) return WORDS[lower];
    for (var i = 0; i < RULES.length; i++) {
      var m = RULES[i][0].exec(text) || RULES[i][0].exec(lower);
      if (m) return RULES[i][1](m);
    }
    if (missed && missed.indexOf(text) < 0) missed.push(text);
    return text;
  }

  // A ledger cell shows a collective as the backend named it (code, kept)
  // or a rank's state.
  function cell(text) {
    if (WORDS.hasOwnProperty(text)) return WORDS[text];
    return text.replace(/ \(pending\)$/, "（未完成）");
  }

  function translate(root, el) {
    if (el.nodeType !== 1 || el.tagName === "STYLE" ||
        el.tagName === "SCRIPT") return;
    ATTRIBUTES.forEach(function (name) {
      var value = el.getAttribute(name);
      if (value !== null && tr(value) !== value)
        el.setAttribute(name, tr(value));
    });
    if (el.children.length === 0 && el.textContent) {
      var text = el.textContent;
      var zh = el.tagName === "TD" ? cell(text) : tr(text);
      if (zh !== text) el.textContent = zh;
    }
    for (var i = 0; i < el.children.length; i++)
      translate(root, el.children[i]);
  }

  function watch(root) {
    var list = [];
    var block = root.querySelector("script[data-figure]");
    var data = block ? JSON.parse(block.textContent) : null;
    function run(el) {
      missed = list;
      shown = data;
      translate(root, el);
      missed = shown = null;
      if (list.length) {
        root.setAttribute("data-untranslated", list.join("\n"));
        console.warn("ddpdemo figure: no Chinese for", list);
      }
    }
    run(root);
    new MutationObserver(function (records) {
      records.forEach(function (r) {
        run(r.type === "characterData" ? r.target.parentNode : r.target);
      });
    }).observe(root, {subtree: true, childList: true, characterData: true,
                      attributes: true, attributeFilter: ATTRIBUTES});
  }

  var figures = document.querySelectorAll(".ddp-fig");
  for (var i = 0; i < figures.length; i++) watch(figures[i]);
})();
