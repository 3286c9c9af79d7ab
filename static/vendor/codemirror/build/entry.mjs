// The parts of CodeMirror 6 the exercise editor uses (static/js/exercises/exercise.js), as one ES module.
export { EditorState } from "@codemirror/state";
export {
  EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection,
} from "@codemirror/view";
export { defaultKeymap, history, historyKeymap, indentWithTab } from "@codemirror/commands";
export {
  LanguageSupport, bracketMatching, defaultHighlightStyle, indentOnInput, indentUnit, syntaxHighlighting,
} from "@codemirror/language";
export { pythonLanguage } from "@codemirror/lang-python";
