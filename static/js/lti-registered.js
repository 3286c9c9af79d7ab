// LTI Dynamic Registration's last step: tell the LMS that opened this page (its dialog's frame, or a window it
// opened) that the registration is done, so it closes the dialog and finishes the installation.
const target = window.opener || (window.parent !== window ? window.parent : null);
if (target) target.postMessage({ subject: "org.imsglobal.lti.close" }, "*");
